// The fields of model-form.js, built once: each labelled, with a line for where its value comes
// from and one for its error (both tied to the field by aria-describedby).

import { el } from './brain-ui.js';

/** Append `group` to `form` with a meta line and an error line for `input`, then `after`. */
export function addField(form, group, input, id, after = []) {
  const meta = el('p', { className: 'setting-meta muted', id: `${id}-meta` });
  const error = el('p', { className: 'error-text field-error', id: `${id}-error` });
  const described = [input.getAttribute('aria-describedby'), meta.id, error.id].filter(Boolean);
  input.setAttribute('aria-describedby', described.join(' '));
  group.append(meta, error, ...after);
  form.append(group);
  return { input, meta, error };
}

/** The inputs of a model form whose ids start with `p`; `presets` fill its kind list. */
export function modelFields(p, presets) {
  const preset = el('select', { id: `${p}-preset` },
    ...presets.map((x) => el('option', { value: x.id, text: x.name })));
  const kindGroup = el('div', { className: 'field-group' },
    el('label', { htmlFor: preset.id, text: 'Kind of model server' }), preset);

  const address = el('input', { id: `${p}-base-url`, type: 'url', inputMode: 'url',
    autocomplete: 'off', placeholder: 'http://127.0.0.1:8080/v1' });
  const addressGroup = el('div', { className: 'field-group' },
    el('label', { htmlFor: address.id, text: 'Address (the base URL, up to /v1)' }), address);

  const keyState = el('span', { className: 'badge', id: `${p}-api-key-state` });
  const keyHint = el('p', { className: 'muted hint', id: `${p}-api-key-hint`,
    text: 'Kept on the server and never shown again. Leave empty to keep the key as it is.' });
  const apiKey = el('input', { id: `${p}-api-key`, type: 'password', autocomplete: 'new-password',
    'aria-describedby': `${keyState.id} ${keyHint.id}` });
  const clearKey = el('input', { id: `${p}-api-key-clear`, type: 'checkbox' });
  const clearGroup = el('label', { className: 'check-label' }, clearKey, ' Remove the saved key');
  const keyGroup = el('div', { className: 'field-group' },
    el('label', { htmlFor: apiKey.id }, 'API key ', keyState), apiKey, keyHint, clearGroup);

  const model = el('input', { id: `${p}-model`, autocomplete: 'off' });
  const modelLabel = el('label', { htmlFor: model.id, text: 'Model' });
  const list = el('select', { id: `${p}-model-list` });
  const listGroup = el('div', { className: 'stack model-list', hidden: true },
    el('label', { htmlFor: list.id, text: 'Models the server offers' }), list);
  const modelGroup = el('div', { className: 'field-group' }, modelLabel, model);

  const window = el('input', { id: `${p}-context-window`, type: 'number', min: '1', step: '1',
    inputMode: 'numeric' });
  const windowGroup = el('div', { className: 'field-group' },
    el('label', { htmlFor: window.id, text: 'Context window (tokens)' }), window);

  for (const input of [address, apiKey, model]) input.setAttribute('spellcheck', 'false');
  return {
    preset, address, addressGroup, apiKey, keyState, keyGroup, clearKey, clearGroup, model,
    modelLabel, list, listGroup, window,
    groups: [
      ['provider', preset, kindGroup], ['base_url', address, addressGroup],
      ['api_key', apiKey, keyGroup], ['model', model, modelGroup, [listGroup]],
      ['context_window', window, windowGroup],
    ],
  };
}
