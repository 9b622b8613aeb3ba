// What the settings forms (model-form.js, brain-settings.js) show beside each field, from
// GET /api/settings: where its value comes from, whether the environment locks it (and by
// which variable), whether it waits for a restart; and the errors of PATCH, split by key.

import { el } from './brain-ui.js';
import { callApi } from './brain-api.js';

const SOURCE_WORDS = {
  default: 'the default', file: 'the config file', settings: 'saved here', environment: 'the environment',
};

/** GET /api/settings: {settings: Map key -> setting, providers: [...]}. */
export async function loadSettings() {
  const data = await callApi('/api/settings');
  return { settings: new Map(data.settings.map((s) => [s.key, s])), providers: data.providers };
}

/** PATCH /api/settings with `changes`; the answer ({applied, restart_needed, settings}). */
export function saveSettings(changes) {
  return callApi('/api/settings', { method: 'PATCH', body: changes });
}

/** The environment variable that sets dotted `key` (as chalie/settings.py env_name). */
export function envName(key) {
  const [section, ...rest] = key.split('.');
  return `CHALIE_${section.toUpperCase()}__${rest.join('__').toUpperCase()}`;
}

/** A DOM-safe id for a key: "llm.primary.base_url" -> "llm-primary-base-url". */
export function idFor(key) {
  return key.replace(/[._]/g, '-');
}

/** The line under a field: its source; locked, pending or restart-needed when so. */
export function metaLine(setting, id) {
  const parts = [];
  if (setting.locked) {
    parts.push(el('span', { className: 'badge locked', text: 'locked' }),
      ` set by the environment (${envName(setting.key)})`);
  } else if (setting.source === 'default' && /^llm\.[a-z]+\./.test(setting.key)) {
    const parent = setting.key.split('.').slice(0, -2).join('.');
    parts.push(setting.value === null && !setting.set ? 'Not set.' : `Inherited from [${parent}].`);
  } else {
    parts.push(`From ${SOURCE_WORDS[setting.source] || setting.source}.`);
  }
  if (setting.pending) {
    parts.push(' ', el('span', { className: 'badge pending', text: 'saved' }),
      ' in effect after a restart');
  } else if (!setting.live && !setting.locked) {
    parts.push(' ', el('span', { className: 'badge restart', text: 'restart' }),
      ' a change takes effect after a restart');
  }
  return el('p', { className: 'setting-meta muted', id, dataset: { key: setting.key } }, ...parts);
}

/** "llm.model: reason; dmn.daily_cap: reason" -> Map key -> reason (for the keys in `keys`). */
export function errorsByKey(message, keys) {
  const out = new Map();
  for (const part of String(message || '').split('; ')) {
    const cut = part.indexOf(': ');
    if (cut > 0 && keys.includes(part.slice(0, cut))) out.set(part.slice(0, cut), part.slice(cut + 2));
  }
  return out;
}

/** What a PATCH answer applied and what waits: one sentence. */
export function savedWords(answer) {
  const now = answer.applied.length ? `In effect now: ${answer.applied.join(', ')}.` : '';
  const later = answer.restart_needed.length
    ? ` Saved, in effect after a restart: ${answer.restart_needed.join(', ')}.` : '';
  return `Saved. ${now}${later}`.trim();
}

/** Mark each field of `fields` (key -> {input, error}) with its error from `message`. */
export function showFieldErrors(fields, message) {
  const found = errorsByKey(message, [...fields.keys()]);
  for (const [key, { input, error }] of fields) {
    const reason = found.get(key);
    error.textContent = reason ? `${key}: ${reason}` : '';
    if (reason) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
  }
  return found;
}
