// The banner both pages show under their header while something is wrong, read from /health
// (health-watch.js): a job's model unavailable (`llm.<job>.state` unreachable or error), the
// store unable to take writes (`store.state` not ok), or the embedder standing in for the one
// configured (`embedder.fell_back`). One line per cause with a link to the setting that fixes
// it; the banner goes away by itself once /health no longer says so.

import { el } from './brain-ui.js';

const DOWN = new Set(['unreachable', 'error']);
const JOB_WORDS = { primary: 'primary model (chats, goals, schedules)', light: 'light model (memory, background thinking)' };
const STORE_WORDS = {
  full: 'The disk is full', read_only: 'The store cannot be written',
  damaged: 'The database is damaged', io_error: 'The disk is failing',
};

/** Each job whose model is down, grouped when they share the same model and problem. */
function modelCauses(llm) {
  const groups = new Map();
  for (const [job, model] of Object.entries(llm || {})) {
    if (!model || !DOWN.has(model.state)) continue;
    const key = `${model.provider}|${model.model}|${model.address}|${model.error}`;
    if (!groups.has(key)) groups.set(key, { jobs: [], model });
    groups.get(key).jobs.push(job);
  }
  return [...groups.values()].map(({ jobs, model }) => {
    const who = jobs.length > 1 ? 'The model (every job)' : `The ${JOB_WORDS[jobs[0]] || jobs[0]}`;
    const state = model.state === 'unreachable' ? 'cannot be reached' : 'is failing';
    const answers = jobs.length === 1 && model.fallback && !DOWN.has(model.fallback.state)
      ? ' Its fallback answers meanwhile.' : '';
    return {
      cause: `model-${jobs.join('-')}`,
      title: `${who} ${state}`,
      detail: `${model.error || `${model.provider} ${model.model} at ${model.address}`}.${answers}`,
      href: '/brain#settings-models',
      link: 'Change the model',
    };
  });
}

function storeCause(store) {
  if (!store || store.state === 'ok') return [];
  return [{
    cause: 'store',
    title: `${STORE_WORDS[store.state] || 'The store cannot take writes'}`,
    detail: `${store.message || store.error || store.state}; nothing new is saved until it is fixed.`,
    href: '/brain#settings-store',
    link: 'Retention and backups',
  }];
}

function embedderCause(embedder) {
  if (!embedder || !embedder.fell_back) return [];
  return [{
    cause: 'embedder',
    title: `Memory uses the ${embedder.kind} embedder instead of ${embedder.wanted}`,
    detail: `${embedder.reason || 'the configured embedder could not start'}; recall is less exact.`,
    href: '/brain#setting-memory-embedder',
    link: 'Change the embedder',
  }];
}

/** What is wrong, by /health: [{cause, title, detail, href, link}], [] when nothing is. */
export function causes(health) {
  if (!health) return [];
  return [...modelCauses(health.llm), ...storeCause(health.store), ...embedderCause(health.embedder)];
}

/** Show `watch`'s answers in the page's #health-banner. */
export function startBanner(watch) {
  const banner = document.getElementById('health-banner');
  const list = document.getElementById('health-banner-list');
  let shown = '';
  watch.subscribe((health) => {
    const found = causes(health);
    const signature = JSON.stringify(found);
    if (signature === shown) return; // the alert is read out only when it changes
    shown = signature;
    list.replaceChildren(...found.map((c) => el('li', { dataset: { cause: c.cause } },
      el('strong', { text: `${c.title}: ` }),
      el('span', { className: 'banner-detail', text: c.detail }), ' ',
      el('a', { href: c.href, text: c.link }))));
    banner.hidden = found.length === 0;
  });
}
