// The brain dashboard's memory section: knowledge grouped by key with its history,
// episodes, the recall search with its scores ("why was this remembered?"), and forgetting
// any of them after a confirmation.

import { callApi, withQuery } from './brain-api.js';
import {
  el, field, renderList, forgetShown, askToConfirm, announce, formatEpoch, formatDecimal,
  shorten,
} from './brain-ui.js';

const KNOWLEDGE_LIMIT = 200;
const EPISODES_LIMIT = 50;

/** Rows (ordered by key, newest first) grouped into [{key, current, history}]. */
function groupByKey(rows) {
  const groups = new Map();
  for (const row of rows) {
    if (!groups.has(row.key)) groups.set(row.key, { key: row.key, current: null, history: [] });
    const group = groups.get(row.key);
    if (row.current && !group.current) group.current = row;
    else group.history.push(row);
  }
  return [...groups.values()];
}

function validity(row) {
  const from = formatEpoch(row.valid_from);
  return row.valid_to ? `from ${from} to ${formatEpoch(row.valid_to)}` : `since ${from}`;
}

function forgetButton(className, label, onClick) {
  return el('button', {
    type: 'button', className: `${className} btn-danger`, text: 'Forget', 'aria-label': label,
    on: { click: (event) => onClick(event.currentTarget) },
  });
}

function buildHistory(group, ctx) {
  if (!group.history.length) return null;
  return el('details', { className: 'history' },
    el('summary', { text: `History (${group.history.length})` }),
    el('ul', { className: 'history-list' }, group.history.map((row) =>
      el('li', { className: 'fact-old', dataset: { id: row.id } },
        el('span', { className: 'fact-value wrap', text: row.value }), ' ',
        el('span', { className: 'muted', text: `${validity(row)} · ${row.source}` }), ' ',
        forgetButton('forget-old', `Forget the old value of ${group.key}: ${shorten(row.value, 40)}`,
          (button) => forgetItem('knowledge', row.id, `${group.key}: ${row.value}`, button, ctx))))));
}

function buildFact(group, ctx) {
  const row = group.current;
  if (!row) {
    // Its current value was forgotten: only older values remain.
    return el('li', { className: 'fact-past item', dataset: { id: group.history[0].id } },
      el('div', { className: 'fact-line' },
        el('span', { className: 'fact-key', text: group.key }),
        el('span', { className: 'muted', text: ' (no current value)' })),
      buildHistory(group, ctx));
  }
  return el('li', { className: 'fact item', dataset: { id: row.id } },
    el('div', { className: 'fact-line' },
      el('span', { className: 'fact-key', text: group.key }), ': ',
      el('span', { className: 'fact-value wrap', text: row.value })),
    el('p', { className: 'meta' },
      field('kind', row.kind), ' ',
      field('confidence', formatDecimal(row.confidence)), ' ',
      field('source', row.source), ' ',
      el('span', { className: 'muted', text: validity(row) })),
    el('div', { className: 'actions' },
      forgetButton('forget', `Forget ${group.key}: ${shorten(row.value, 40)}`,
        (button) => forgetItem('knowledge', row.id, `${group.key}: ${row.value}`, button, ctx))),
    buildHistory(group, ctx));
}

function buildEpisode(item, ctx) {
  return el('li', { className: 'episode item', dataset: { id: item.id } },
    el('p', { className: 'episode-gist wrap' }, el('strong', { text: item.gist })),
    el('p', { className: 'meta wrap' },
      field('intent', item.intent), ' ', field('outcome', item.outcome)),
    el('p', { className: 'meta' },
      field('when', formatEpoch(item.happened_at)), ' ', field('channel', item.channel)),
    el('div', { className: 'actions' },
      forgetButton('forget', `Forget the episode: ${shorten(item.gist, 60)}`,
        (button) => forgetItem('episodes', item.id, item.gist, button, ctx))));
}

/** Confirm, then DELETE /api/memory/<kind>/<id> and reload the lists. */
async function forgetItem(kind, id, description, button, ctx) {
  const what = kind === 'knowledge' ? 'this fact' : 'this episode';
  const sure = await askToConfirm(
    `Forget ${what}? “${shorten(description, 120)}” Chalie will not remember it again, and it is ` +
    'blanked out of older text.', button);
  if (!sure) return;
  const done = await ctx.guard(() =>
    callApi(`/api/memory/${kind}/${encodeURIComponent(id)}`, { method: 'DELETE' }));
  if (done) announce('Forgotten.');
  forgetShown(document.getElementById('knowledge-list'));
  forgetShown(document.getElementById('episodes-list'));
  await ctx.reload();
}

// --- search -----------------------------------------------------------------------------------

let lastQuery = null;

function scoreDetails(hit) {
  const parts = [
    ['rrf', formatDecimal(hit.rrf, 4)],
    ['full-text rank', hit.fts_rank ?? '—'],
    ['vector rank', hit.vector_rank ?? '—'],
    ['similarity', formatDecimal(hit.similarity, 3)],
    ['recency', formatDecimal(hit.recency, 3)],
    ['strength', formatDecimal(hit.strength, 3)],
  ];
  return el('details', { className: 'why' },
    el('summary', { text: 'Why' }),
    el('dl', { className: 'score-list' },
      parts.flatMap(([name, value]) => [el('dt', { text: name }), el('dd', { text: String(value) })])));
}

function buildResult(hit) {
  return el('li', { className: 'result item', dataset: { id: `${hit.kind}:${hit.id}` } },
    el('div', { className: 'item-head' },
      el('span', { className: 'badge result-kind', text: hit.kind }), ' ',
      el('span', { className: 'result-score', text: `score ${formatDecimal(hit.score, 4)}` }),
      hit.key ? [' ', el('span', { className: 'muted', text: `key ${hit.key}` })] : null),
    el('p', { className: 'result-text wrap', text: hit.text }),
    el('p', { className: 'meta' },
      field('when', formatEpoch(hit.created_at)),
      hit.role ? [' ', field('said by', hit.speaker ? `${hit.speaker} (a program)` : hit.role)]
        : null),
    scoreDetails(hit));
}

async function searchMemory(query) {
  const found = await callApi(withQuery('/api/memory/search', { q: query }));
  lastQuery = query;
  document.getElementById('memory-search-area').hidden = false;
  const note = document.getElementById('memory-search-note');
  note.textContent = found.degraded
    ? 'Found by full text only: the embedder cannot be reached right now.' : '';
  note.hidden = !found.degraded;
  const results = document.getElementById('memory-results');
  forgetShown(results);
  renderList(results, found.results, buildResult, `Nothing found for “${query}”.`);
  announce(`${found.results.length} result${found.results.length === 1 ? '' : 's'} for ${query}.`);
}

// --- the section ------------------------------------------------------------------------------

async function loadKnowledge(ctx) {
  const { items } = await callApi(withQuery('/api/memory/knowledge',
    { history: 1, limit: KNOWLEDGE_LIMIT }));
  renderList(document.getElementById('knowledge-list'), groupByKey(items),
    (group) => buildFact(group, ctx), 'Nothing known yet.');
  const note = document.getElementById('knowledge-note');
  note.hidden = items.length < KNOWLEDGE_LIMIT;
  note.textContent = `Showing the first ${KNOWLEDGE_LIMIT} values (by key); search to find others.`;
}

async function loadEpisodes(ctx) {
  const { items } = await callApi(withQuery('/api/memory/episodes', { limit: EPISODES_LIMIT }));
  renderList(document.getElementById('episodes-list'), items,
    (item) => buildEpisode(item, ctx), 'No episodes yet.');
}

export const memorySection = {
  id: 'memory',
  setup(ctx) {
    const form = document.getElementById('memory-search-form');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const query = document.getElementById('memory-search').value.trim();
      if (query) ctx.guard(() => searchMemory(query));
    });
  },
  async load(ctx) {
    const results = await Promise.allSettled([
      loadKnowledge(ctx), loadEpisodes(ctx), lastQuery ? searchMemory(lastQuery) : null,
    ]);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  },
};
