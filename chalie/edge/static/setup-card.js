// The chat page's setup card: while no job's model can be reached, the page shows a model form
// (model-form.js) in place of the message box. "No job's model can be reached" is what /health
// says once something tried them: every job's model (and its fallback, when it has one) is
// `unreachable` or `error`. A model still `unknown` (the start-up check has not answered yet)
// leaves the message box as it is; health-watch.js polls every second until it settles.
//
// The card writes [llm], the table both jobs inherit, unless the primary job has model keys of
// its own (then [llm.primary]: writing [llm] would change nothing it uses). Once saved, the
// server answers with the new model from the next message on: the card goes and the message
// box comes back, focused. "Use the message box anyway" hides the card until /health changes.

import { loadSettings } from './settings-meta.js';
import { createModelForm } from './model-form.js';

const DOWN = new Set(['unreachable', 'error']);
const OWN_KEYS = ['provider', 'base_url', 'model', 'api_key'];

function jobDown(job) {
  return Boolean(job) && DOWN.has(job.state) && (!job.fallback || DOWN.has(job.fallback.state));
}

/** Whether /health says no job's model can be reached (false while any is unknown). */
export function noModelAnswers(health) {
  const jobs = Object.values((health && health.llm) || {});
  return jobs.length > 0 && jobs.every(jobDown);
}

/** The table the card writes: [llm.primary] when it has keys of its own, else [llm]. */
export function tableFor(settings) {
  const own = OWN_KEYS.some((k) => {
    const s = settings.get(`llm.primary.${k}`);
    return s && s.source !== 'default';
  });
  return own ? 'llm.primary' : 'llm';
}

/** Wire #setup to `watch`; it stands in for the message box (`composer`) and the
 *  conversation (`log`) while shown. */
export function startSetupCard(watch, { composer, input, log }) {
  const card = document.getElementById('setup');
  const why = document.getElementById('setup-why');
  const where = document.getElementById('setup-table');
  const holder = document.getElementById('setup-form');
  const error = document.getElementById('setup-error');
  let form = null;
  let loading = null;
  let dismissedAt = null; // the /health signature the person dismissed the card at
  let shown = false;

  async function mountForm() {
    const { settings, providers } = await loadSettings();
    const table = tableFor(settings);
    where.textContent = table === 'llm'
      ? 'These settings go to [llm], which every job uses unless it has its own.'
      : 'These settings go to [llm.primary]: the primary job has model settings of its own.';
    form = createModelForm({ table, settings, providers, onSaved: saved });
    holder.replaceChildren(form.element);
  }

  function saved(answer) {
    if (!answer.applied.some((k) => k.startsWith('llm.'))) return;
    watch.refresh(); // the new model is checked at once: /health says when it answers
  }

  function show() {
    why.textContent = 'Chalie has no model that answers, so it cannot reply yet (the banner '
      + 'above says why). Choose a model server, test it, and save: no restart needed.';
    if (!shown) {
      shown = true;
      card.hidden = false;
      composer.hidden = true;
      log.hidden = true;
      if (!form && !loading) {
        error.textContent = '';
        loading = mountForm().catch((e) => { error.textContent = e.message; })
          .finally(() => { loading = null; });
      }
    }
  }

  function hide() {
    if (!shown) return;
    shown = false;
    card.hidden = true;
    composer.hidden = false;
    log.hidden = false;
    input.focus();
  }

  document.getElementById('setup-dismiss').addEventListener('click', () => {
    dismissedAt = JSON.stringify(watch.last() && watch.last().llm);
    hide();
  });

  watch.subscribe((health) => {
    const signature = JSON.stringify(health.llm);
    if (dismissedAt !== null && dismissedAt !== signature) dismissedAt = null;
    if (noModelAnswers(health) && dismissedAt === null) show();
    else hide();
  });
}
