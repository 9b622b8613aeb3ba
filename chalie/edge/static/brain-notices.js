// The dashboard's notices, from GET /health: the store when it cannot take writes or its disk
// runs low (`store`: "the disk holding data is full; free some space"), and background jobs
// that wait after failing (`jobs`: "the light model cannot write the episode JSON: …"). Hidden
// while all is well; shown again with each answer of /health the page's health-watch.js reads.

import { el, formatEpoch } from './brain-ui.js';

const JOB_NAMES = { encoder: 'Episode encoding', critic: 'The critic' };

function buildNotice(job) {
  const name = JOB_NAMES[job.job] || job.job;
  const times = job.failures === 1 ? 'once' : `${job.failures} times in a row`;
  return el('li', { className: 'item notice', dataset: { job: job.job, channel: job.channel } },
    el('p', { className: 'wrap' },
      el('strong', { text: `${name} is paused` }), ` (channel ${job.channel}): ${job.error}`),
    el('p', { className: 'muted', text:
      `Failed ${times}; it makes no model call until ${formatEpoch(job.retry_at)}, then tries again.` }));
}

const STORE_TITLES = {
  full: 'The disk is full', read_only: 'The store cannot be written', damaged: 'The database is damaged',
  io_error: 'The disk is failing',
};

/** The store's notice: why it cannot take writes (and what waits), or that space runs low. */
function buildStoreNotice(store) {
  if (store.state !== 'ok') {
    const held = store.held_messages
      ? ` ${store.held_messages === 1 ? 'One message is' : `${store.held_messages} messages are`} kept, to be answered once it takes writes again.`
      : '';
    return el('li', { className: 'item notice', dataset: { store: store.state } },
      el('p', { className: 'wrap' },
        el('strong', { text: STORE_TITLES[store.state] || 'The store cannot take writes' }),
        `: ${store.message}.`),
      el('p', { className: 'muted', text: `Since ${formatEpoch(store.since)}.${held}` }));
  }
  return el('li', { className: 'item notice', dataset: { store: 'space_low' } },
    el('p', { className: 'wrap' }, el('strong', { text: 'Disk space is low' }),
      `: ${store.free_mb} MiB free where the store lives, under store.min_free_mb (${store.min_free_mb} MiB).`));
}

/** Show what /health (read by health-watch.js) says needs attention; hide the box when
 *  nothing does. */
export function showNotices(health) {
  const jobs = Array.isArray(health && health.jobs) ? health.jobs : [];
  const store = health && health.store;
  const items = jobs.map(buildNotice);
  if (store && (store.state !== 'ok' || store.space_low)) items.unshift(buildStoreNotice(store));
  const box = document.getElementById('notices');
  document.getElementById('notices-list').replaceChildren(...items);
  box.hidden = items.length === 0;
}
