// The dashboard's form for the settings that are not a model: the embedder, the time zone,
// quiet hours, the daily cap on proactive messages, the background budgets, the tools that ask
// first or never run, retention and backups, and reaching the person away from the page (the
// Telegram bot's token is a secret: never shown, only whether it is set; an empty field keeps
// it). Each field shows where its value comes from, is
// locked when the environment sets it, says when a change waits for a restart, and (when saved
// here) can go back to the config file's value or the default. "Save settings" sends the keys
// that changed (PATCH /api/settings); a refused change names its key beside its field.

import { el } from './brain-ui.js';
import { idFor, metaLine, saveSettings, savedWords, showFieldErrors } from './settings-meta.js';

const EMBEDDERS = [
  ['minilm', 'MiniLM in process (semantic)'], ['hashed', 'Hashed words (lexical, no model)'],
  ['openai', 'An OpenAI-compatible /embeddings endpoint'], ['local', 'sentence-transformers (the local extra)'],
];

export const GROUPS = [
  { id: 'settings-memory', title: 'Memory', fields: [
    ['memory.embedder', 'Embedder', { choices: EMBEDDERS }]] },
  { id: 'settings-proactive', title: 'Proactive messages', fields: [
    ['dmn.timezone', 'Time zone (an IANA name such as Europe/Lisbon, or local)'],
    ['dmn.quiet_hours', 'Quiet hours (HH:MM-HH:MM; empty for none)'],
    ['dmn.daily_cap', 'At most this many a day (0: none)']] },
  { id: 'settings-budgets', title: 'Background budgets (tokens a day)', fields: [
    ['governor.dmn_tokens_per_day', 'Background thinking (DMN)'],
    ['governor.scheduled_tokens_per_day', 'Scheduled prompts'],
    ['governor.goal_tokens_per_day', 'Goals'],
    ['governor.encoder_tokens_per_day', 'Episode encoding']] },
  { id: 'settings-tools', title: 'Tools', fields: [
    ['tools.confirm', 'Ask me before running (tool names, comma separated)'],
    ['tools.block', 'Never run (tool names, comma separated)']] },
  { id: 'settings-away', title: 'Away from the page', fields: [
    ['notify.skip_when_visible', 'Send nothing away while a page of mine is open and visible',
      { choices: [['true', 'Yes'], ['false', 'No: send it anyway']] }],
    ['push.subject', 'Contact push services see (mailto: or https:)'],
    ['push.ttl_s', 'A push waits for an offline device at most (seconds)'],
    ['notify.retry_initial_s', 'A failed send is tried again after (seconds, doubling)'],
    ['notify.retry_max_s', '… at most this long apart (seconds)'],
    ['notify.give_up_s', 'Given up after (seconds)'],
    ['notify.timeout_s', 'Each send waits at most (seconds)'],
    ['notify.log_days', 'Keep the delivery log (days)'],
    ['telegram.token', 'Telegram bot token (from @BotFather)'],
    ['telegram.base_url', 'Telegram Bot API address'],
    ['telegram.base_file_url', 'Telegram Bot API file address'],
    ['telegram.pairing_code_ttl_s', 'A pairing code is good for (seconds)'],
    ['telegram.edit_every_s', 'An answer in Telegram is edited at most every (seconds)']] },
  { id: 'settings-store', title: 'Retention and backups', fields: [
    ['store.transcript_days', 'Keep what was said, and the images sent (days; 0: always)'],
    ['store.tool_calls_days', 'Keep tool-call records (days)'],
    ['store.events_days', 'Keep the chat event log (days)'],
    ['store.backups_kept', 'Daily backups kept (0: none)'],
    ['store.backup_dir', 'Backup folder (empty: backups beside the data)']] },
];

function inputFor(key, setting, options) {
  const id = `setting-${idFor(key)}-input`;
  if (options.choices) {
    const known = options.choices.map(([value, words]) => el('option', { value, text: words }));
    if (!options.choices.some(([v]) => v === setting.value)) {
      known.push(el('option', { value: setting.value ?? '', text: String(setting.value ?? '') }));
    }
    return el('select', { id }, ...known);
  }
  if (typeof setting.value === 'number') {
    return el('input', { id, type: 'number', min: '0', step: 'any', inputMode: 'decimal' });
  }
  if (setting.secret) return el('input', { id, type: 'password', autocomplete: 'new-password' });
  return el('input', { id, autocomplete: 'off' });
}

function shown(value) {
  if (Array.isArray(value)) return value.join(', ');
  return value === null || value === undefined ? '' : String(value);
}

function parsed(input, setting) {
  if (setting.secret) return input.value.trim() === '' ? setting.value : input.value.trim();
  if (typeof setting.value === 'boolean') return input.value === 'true';
  if (Array.isArray(setting.value)) return input.value.split(',').map((s) => s.trim()).filter(Boolean);
  if (typeof setting.value === 'number') return input.value === '' ? setting.value : Number(input.value);
  return input.value.trim();
}

/** The form for GROUPS' keys of `settings` (Map key -> setting); `onSaved(answer, map)`. */
export function createSettingsForm(settings, { onSaved = () => {} } = {}) {
  const fields = new Map(); // key -> {input, meta, error, reset, setting}
  const result = el('p', { className: 'ok-text form-result', id: 'settings-result', role: 'status' });
  const problem = el('p', { className: 'error-text form-error', id: 'settings-error', role: 'alert' });
  const save = el('button', { type: 'submit', className: 'btn-primary', id: 'settings-save', text: 'Save settings' });
  const form = el('form', { id: 'settings-form', className: 'settings-form', novalidate: true });

  for (const group of GROUPS) {
    const fieldset = el('fieldset', { id: group.id, className: 'settings-group', tabindex: '-1' },
      el('legend', { text: group.title }));
    for (const [key, words, options = {}] of group.fields) {
      const setting = settings.get(key);
      if (!setting) continue;
      const input = inputFor(key, setting, options);
      const meta = el('p', { id: `${input.id}-meta` });
      const error = el('p', { className: 'error-text field-error', id: `${input.id}-error` });
      const reset = el('button', { type: 'button', className: 'reset', text: 'Use the default',
        'aria-label': `${words}: drop the saved value` });
      input.setAttribute('aria-describedby', `${meta.id} ${error.id}`);
      const field = { input, meta, error, reset, setting };
      reset.addEventListener('click', () => send({ [key]: null }));
      fieldset.append(el('div', { className: 'field-group', id: `setting-${idFor(key)}`, dataset: { key } },
        el('label', { htmlFor: input.id }, words, ' ', el('code', { className: 'key', text: key })),
        el('div', { className: 'inline-row' }, input, reset), meta, error));
      fields.set(key, field);
    }
    form.append(fieldset);
  }
  form.append(el('div', { className: 'actions' }, save), result, problem);

  function fill(next) {
    for (const [key, field] of fields) {
      const setting = next.get(key) || field.setting;
      field.setting = setting;
      field.input.value = shown(setting.value);
      if (setting.secret) field.input.placeholder = setting.set ? 'set (type a new one to replace it)' : 'not set';
      field.input.disabled = setting.locked;
      field.reset.hidden = setting.locked || setting.source !== 'settings';
      const meta = metaLine(setting, field.meta.id);
      field.meta.replaceWith(meta);
      field.meta = meta;
    }
  }

  function changes() {
    const out = {};
    for (const [key, { input, setting }] of fields) {
      if (setting.locked) continue;
      const value = parsed(input, setting);
      if (JSON.stringify(value) !== JSON.stringify(setting.value)) out[key] = value;
    }
    return out;
  }

  async function send(body) {
    result.textContent = '';
    problem.textContent = '';
    showFieldErrors(fields, '');
    if (!Object.keys(body).length) { result.textContent = 'Nothing changed.'; return; }
    save.disabled = true;
    try {
      const answer = await saveSettings(body);
      const map = new Map(answer.settings.map((s) => [s.key, s]));
      fill(map);
      result.textContent = savedWords(answer);
      onSaved(answer, map);
    } catch (error) {
      problem.textContent = error.message;
      showFieldErrors(fields, error.message);
    } finally {
      save.disabled = false;
    }
  }

  form.addEventListener('submit', (event) => { event.preventDefault(); send(changes()); });
  fill(settings);
  return { element: form, fill };
}
