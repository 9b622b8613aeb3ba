// The dashboard's Settings section (GET/PATCH /api/settings): each job's model and fallback as
// the chat page's setup card shows them (model-form.js), then everything else the server can
// change while running (settings-fields.js). A save in one form refreshes the others (a job's
// table shows what it inherits from [llm]). Links such as /brain#settings-models or
// /brain#setting-memory-embedder (the banner's) scroll to the field once it is there.

import { el } from './brain-ui.js';
import { loadSettings } from './settings-meta.js';
import { createModelForm } from './model-form.js';
import { createSettingsForm } from './settings-fields.js';

const TABLES = [
  ['llm', 'Every job', '[llm]: the model every job uses unless its own table says otherwise.'],
  ['llm.primary', 'Primary job', '[llm.primary]: chats, scheduled prompts and goal steps.'],
  ['llm.light', 'Light job', '[llm.light]: memory, compaction, background thinking and goal plans.'],
  ['llm.primary.fallback', "Primary job's fallback", 'Answers while the primary model is down.'],
  ['llm.light.fallback', "Light job's fallback", 'Answers while the light model is down.'],
];

function summaryOf(settings, table) {
  const value = (k) => settings.get(`${table}.${k}`)?.value;
  if (!value('provider')) return 'not set';
  const where = value('provider') === 'llamacpp' ? '' : ` at ${value('base_url')}`;
  return `${value('provider')} ${value('model')}${where}`;
}

let built = null; // {forms: [...], summaries: Map table -> element}

function fillAll(settings) {
  for (const form of built.forms) form.fill(settings);
  for (const [table, summary] of built.summaries) summary.textContent = summaryOf(settings, table);
}

function build(ctx, settings, providers) {
  const models = document.getElementById('settings-models-list');
  const others = document.getElementById('settings-others');
  built = { forms: [], summaries: new Map() };
  const onSaved = (_answer, map) => fillAll(map);
  for (const [table, name, about] of TABLES) {
    const summary = el('span', { className: 'muted table-summary' });
    const form = createModelForm({ table, settings, providers, onSaved });
    built.forms.push(form);
    built.summaries.set(table, summary);
    models.append(el('details', { className: 'model-table', id: `settings-${table.replace(/\./g, '-')}`,
      open: table === 'llm', dataset: { table } },
    el('summary', {}, el('strong', { text: name }), ' ', summary),
    el('p', { className: 'muted hint', text: about }), form.element));
  }
  const form = createSettingsForm(settings, { onSaved });
  built.forms.push(form);
  others.replaceChildren(form.element);
  fillAll(settings);
  goToHash();
}

/** Scroll to (and focus) the settings element the address names, opening its <details>. */
function goToHash() {
  const target = location.hash.length > 1 && document.getElementById(location.hash.slice(1));
  if (!target || !document.getElementById('settings').contains(target)) return;
  const details = target.closest('details');
  if (details) details.open = true;
  target.scrollIntoView({ block: 'start' });
  const focusable = target.matches('input, select, details, fieldset, h2, h3')
    ? target : target.querySelector('input:not([disabled]), select:not([disabled]), summary');
  if (focusable) focusable.focus({ preventScroll: true });
}

export const settingsSection = {
  id: 'settings',
  async load(ctx) {
    const { settings, providers } = await loadSettings();
    if (!built) build(ctx, settings, providers);
    else fillAll(settings);
  },
  setup() {
    window.addEventListener('hashchange', goToHash);
  },
};
