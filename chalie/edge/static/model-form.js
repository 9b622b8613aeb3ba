// One job's model as a form: the kind of server (presets that fill the address), the address,
// the API key (a password field never filled in: the server only says whether one is set), the
// model (typed, or picked from the list the server offers once tested) and the context window.
// "Test" runs the doctor's model checks live for the values in the form (POST
// /api/settings/test, nothing saved); "Save" saves the changed keys of `table` (PATCH
// /api/settings), which the server applies while running. Used by the chat page's setup card
// and by every model table of the dashboard's settings.

import { el } from './brain-ui.js';
import { callApi } from './brain-api.js';
import { idFor, metaLine, saveSettings, savedWords, showFieldErrors } from './settings-meta.js';
import { addField, modelFields } from './model-fields.js';

export const PRESETS = [
  { id: 'ollama', name: 'Ollama', provider: 'openai', url: 'http://127.0.0.1:11434/v1' },
  { id: 'llama-server', name: 'llama.cpp server', provider: 'openai', url: 'http://127.0.0.1:8080/v1' },
  { id: 'vllm', name: 'vLLM', provider: 'openai', url: 'http://127.0.0.1:8000/v1' },
  { id: 'lm-studio', name: 'LM Studio', provider: 'openai', url: 'http://127.0.0.1:1234/v1' },
  { id: 'openai', name: 'OpenAI', provider: 'openai', url: 'https://api.openai.com/v1' },
  { id: 'openrouter', name: 'OpenRouter', provider: 'openai', url: 'https://openrouter.ai/api/v1' },
  { id: 'deepseek', name: 'DeepSeek', provider: 'openai', url: 'https://api.deepseek.com/v1' },
  { id: 'custom', name: 'Another OpenAI-compatible server', provider: 'openai', url: null },
  { id: 'anthropic', name: 'Anthropic', provider: 'anthropic', url: 'https://api.anthropic.com/v1' },
  { id: 'gguf', name: 'A GGUF file run inside Chalie', provider: 'llamacpp', url: null },
];

const LEVEL_WORDS = { ok: 'ok', warn: 'warning', FAIL: 'failed' };

/** The preset the current provider and address match ("custom" for another address). */
function presetOf(provider, url) {
  if (provider === 'anthropic') return 'anthropic';
  if (provider === 'llamacpp') return 'gguf';
  const found = PRESETS.find((p) => p.provider === 'openai' && p.url && p.url === url);
  return found ? found.id : 'custom';
}

/**
 * A form for the model keys of `table` ("llm", "llm.primary", "llm.light.fallback", ...).
 * settings: Map key -> setting (GET /api/settings); providers: what this server can run;
 * onSaved(answer) after a save. Returns {element, fill(settings)}.
 */
export function createModelForm({ table, settings, providers, onSaved = () => {} }) {
  const p = idFor(table);
  const key = (name) => `${table}.${name}`;
  const f = modelFields(p, PRESETS.filter((x) => x.provider !== 'llamacpp' || providers.includes('llamacpp')));
  const fields = new Map(); // key -> {input, error, meta}
  const checks = el('ul', { className: 'checks', id: `${p}-checks`, role: 'status', hidden: true });
  const result = el('p', { className: 'ok-text form-result', id: `${p}-result`, role: 'status' });
  const problem = el('p', { className: 'error-text form-error', id: `${p}-error`, role: 'alert' });
  const test = el('button', { type: 'button', id: `${p}-test`, text: 'Test' });
  const save = el('button', { type: 'submit', id: `${p}-save`, className: 'btn-primary', text: 'Save' });
  const form = el('form', { className: 'model-form', id: `${p}-form`, novalidate: true,
    dataset: { table } });
  let current = settings;

  for (const [name, input, group, after] of f.groups) {
    fields.set(key(name), addField(form, group, input, `${p}-${idFor(name)}`, after));
  }
  form.append(el('div', { className: 'actions' }, test, save), checks, result, problem);

  function setting(name) {
    return current.get(key(name)) || { key: key(name), value: null, source: 'default', live: true,
      locked: false, secret: name === 'api_key', set: false, pending: false };
  }

  function showKind() {
    const preset = f.preset.value;
    f.addressGroup.hidden = preset === 'gguf';
    f.keyGroup.hidden = preset === 'gguf';
    f.modelLabel.textContent = preset === 'gguf' ? 'Model file (a .gguf path on the server)' : 'Model';
  }

  /** Show `settings`' values and where each comes from (after loading or saving). */
  function fill(next) {
    current = next;
    const provider = setting('provider');
    const url = setting('base_url');
    f.preset.value = presetOf(provider.value, url.value);
    f.address.value = url.value ?? '';
    f.model.value = setting('model').value ?? '';
    f.window.value = setting('context_window').value ?? '';
    f.apiKey.value = '';
    const secret = setting('api_key');
    f.keyState.textContent = secret.set ? 'set' : 'not set';
    f.keyState.className = `badge ${secret.set ? 'online' : 'offline'}`;
    f.clearKey.checked = false;
    f.clearGroup.hidden = !(secret.set && secret.source === 'settings');
    for (const option of f.preset.options) {
      const preset = PRESETS.find((x) => x.id === option.value);
      option.disabled = provider.locked && preset.provider !== provider.value;
    }
    for (const [k, field] of fields) {
      const s = current.get(k) || setting(k.slice(table.length + 1));
      field.input.disabled = s.locked;
      const meta = metaLine(s, field.meta.id);
      field.meta.replaceWith(meta);
      field.meta = meta;
    }
    f.preset.disabled = provider.locked && url.locked;
    showKind();
  }

  /** The keys whose value the form changes (locked ones never), as PATCH takes them. */
  function changes() {
    const preset = PRESETS.find((x) => x.id === f.preset.value);
    const wanted = {
      provider: preset.provider,
      base_url: preset.provider === 'llamacpp' ? null : f.address.value.trim(),
      model: f.model.value.trim(),
      context_window: f.window.value === '' ? null : Number(f.window.value),
    };
    const out = {};
    for (const [name, value] of Object.entries(wanted)) {
      const s = setting(name);
      const empty = value === null || (value === '' && s.value === null); // nothing typed, none set
      if (s.locked || empty || value === s.value) continue;
      out[key(name)] = value;
    }
    if (!setting('api_key').locked) {
      if (f.apiKey.value) out[key('api_key')] = f.apiKey.value;
      else if (f.clearKey.checked) out[key('api_key')] = null;
    }
    // A table with no model of its own yet (a fallback) gets a provider only with something else.
    const alone = Object.keys(out).length === 1 && key('provider') in out;
    if (setting('provider').value === null && alone) delete out[key('provider')];
    return out;
  }

  function clearMessages() {
    result.textContent = '';
    problem.textContent = '';
    showFieldErrors(fields, '');
  }

  function showModels(models) {
    if (!models || !models.length) { f.listGroup.hidden = true; return; }
    const typed = f.model.value.trim();
    f.list.replaceChildren(el('option', { value: '', text: 'Choose a model…' }),
      ...models.map((m) => el('option', { value: m, text: m, selected: m === typed })));
    f.listGroup.hidden = false;
  }

  f.preset.addEventListener('change', () => {
    const preset = PRESETS.find((x) => x.id === f.preset.value);
    if (preset.url) f.address.value = preset.url;
    showKind();
    f.listGroup.hidden = true;
    if (preset.id === 'custom') f.address.focus();
  });
  f.list.addEventListener('change', () => { if (f.list.value) f.model.value = f.list.value; });

  test.addEventListener('click', async () => {
    clearMessages();
    checks.replaceChildren(el('li', { className: 'muted', text: 'Testing… (a model may take a while to answer)' }));
    checks.hidden = false;
    test.disabled = true;
    try {
      const answer = await callApi('/api/settings/test', { method: 'POST', body: changes() });
      checks.replaceChildren(...answer.checks.map((c) => el('li', { className: `check check-${c.level}` },
        el('span', { className: `badge level-${c.level}`, text: LEVEL_WORDS[c.level] || c.level }), ' ',
        el('span', { className: 'check-what', text: c.what }),
        c.problem ? el('span', { className: 'check-problem', text: `: ${c.problem}` }) : null)));
      checks.append(el('li', { className: answer.ok ? 'ok-text' : 'error-text', text: answer.ok
        ? 'Every check passed: Save to use these settings.'
        : 'A check failed: change the setting it names, then test again.' }));
      showModels(answer.models);
    } catch (error) {
      checks.hidden = true;
      problem.textContent = error.message;
      showFieldErrors(fields, error.message);
    } finally {
      test.disabled = false;
    }
  });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const body = changes();
    if (!Object.keys(body).length) { result.textContent = 'Nothing changed.'; return; }
    save.disabled = true;
    try {
      const answer = await saveSettings(body);
      const saved = new Map(answer.settings.map((s) => [s.key, s]));
      fill(saved);
      result.textContent = savedWords(answer);
      onSaved(answer, saved);
    } catch (error) {
      problem.textContent = error.message;
      showFieldErrors(fields, error.message);
    } finally {
      save.disabled = false;
    }
  });

  fill(settings);
  return { element: form, fill };
}
