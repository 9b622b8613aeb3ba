// The dashboard's notices: background jobs that wait after failing, as GET /health lists them
// in `jobs` ("the light model cannot write the episode JSON: …"). Hidden while every job works;
// reloaded with the live sections. A failure to load them is not shown: the sections say so.

import { callApi } from './brain-api.js';
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

/** Show the jobs /health lists as backing off; hide the box when there are none. */
export async function loadNotices() {
  let health;
  try {
    health = await callApi('/health');
  } catch {
    return;
  }
  const jobs = Array.isArray(health && health.jobs) ? health.jobs : [];
  const box = document.getElementById('notices');
  document.getElementById('notices-list').replaceChildren(...jobs.map(buildNotice));
  box.hidden = jobs.length === 0;
}
