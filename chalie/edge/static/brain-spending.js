// The brain dashboard's cost and proactivity: tokens per day stacked by path (an SVG chart
// with a table of the same numbers), each path's budget, and proactive messages sent and
// held back by reason.

import { callApi, withQuery } from './brain-api.js';
import { el, svgEl, renderList, field, formatEpoch, formatNumber } from './brain-ui.js';

const DAYS = 7;
const KNOWN_PATHS = ['user', 'dmn', 'scheduled', 'goal', 'encoder'];
const CHART_HEIGHT = 220;
const MARGIN = { top: 14, right: 8, bottom: 28, left: 52 };

/** The last `days` UTC days, oldest first, as "YYYY-MM-DD" (the server groups by UTC day). */
function lastDays(days) {
  const out = [];
  const today = new Date();
  for (let i = days - 1; i >= 0; i -= 1) {
    const day = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i));
    out.push(day.toISOString().slice(0, 10));
  }
  return out;
}

function dayLabel(day) {
  return new Date(`${day}T00:00:00Z`).toLocaleDateString(undefined,
    { month: 'short', day: 'numeric', timeZone: 'UTC' });
}

function compact(n) {
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
  return String(n);
}

/** A round number at or above `n`, for the top of the axis. */
function niceCeiling(n) {
  if (n <= 0) return 1;
  const step = 10 ** Math.floor(Math.log10(n));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * step >= n) return m * step;
  return 10 * step;
}

function seriesClass(path) {
  return KNOWN_PATHS.includes(path) ? `series-${path}` : 'series-other';
}

/** {days, paths, tokens: Map(day -> Map(path -> tokens)), totals: Map(day -> tokens)} */
function tabulate(byDay) {
  const days = lastDays(DAYS);
  for (const row of byDay) if (!days.includes(row.day)) days.push(row.day);
  days.sort();
  const seen = new Set(byDay.map((row) => row.path));
  const paths = [...KNOWN_PATHS.filter((p) => seen.has(p)), ...[...seen].filter((p) => !KNOWN_PATHS.includes(p)).sort()];
  const tokens = new Map(days.map((d) => [d, new Map()]));
  for (const row of byDay) tokens.get(row.day).set(row.path, (tokens.get(row.day).get(row.path) || 0) + row.tokens);
  const totals = new Map(days.map((d) => [d, [...tokens.get(d).values()].reduce((a, b) => a + b, 0)]));
  return { days, paths, tokens, totals };
}

function chartSummary(table) {
  const total = [...table.totals.values()].reduce((a, b) => a + b, 0);
  if (!total) return `Tokens per day over the last ${table.days.length} days: none spent.`;
  let top = table.days[0];
  for (const day of table.days) if (table.totals.get(day) > table.totals.get(top)) top = day;
  const byPath = table.paths.map((path) => {
    const sum = table.days.reduce((a, d) => a + (table.tokens.get(d).get(path) || 0), 0);
    return `${path} ${formatNumber(sum)}`;
  }).join(', ');
  return `Tokens per day over the last ${table.days.length} days, stacked by path: ` +
    `${formatNumber(total)} in all (${byPath}); the most on ${dayLabel(top)} ` +
    `with ${formatNumber(table.totals.get(top))}.`;
}

function buildChart(table, width) {
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = CHART_HEIGHT - MARGIN.top - MARGIN.bottom;
  const top = niceCeiling(Math.max(...table.totals.values(), 0));
  const y = (v) => MARGIN.top + plotH - (v / top) * plotH;
  const slot = plotW / table.days.length;
  const barW = Math.max(4, Math.min(48, slot * 0.6));
  const svg = svgEl('svg', {
    id: 'spending-chart', role: 'img', viewBox: `0 0 ${width} ${CHART_HEIGHT}`,
    'aria-label': chartSummary(table), class: 'chart', preserveAspectRatio: 'xMidYMid meet',
  });
  for (const value of [0, top / 2, top]) {
    svg.append(
      svgEl('line', { class: 'grid', x1: MARGIN.left, x2: width - MARGIN.right, y1: y(value), y2: y(value) }),
      svgEl('text', { class: 'axis', x: MARGIN.left - 6, y: y(value) + 4, 'text-anchor': 'end' }, compact(value)));
  }
  const labelEvery = Math.ceil(table.days.length / Math.max(1, Math.floor(plotW / 56)));
  table.days.forEach((day, i) => {
    const x = MARGIN.left + slot * i + (slot - barW) / 2;
    let base = 0;
    for (const path of table.paths) {
      const value = table.tokens.get(day).get(path) || 0;
      if (!value) continue;
      svg.append(svgEl('rect', {
        class: `bar ${seriesClass(path)}`, x, y: y(base + value), width: barW,
        height: Math.max(1, y(base) - y(base + value)),
      }, svgEl('title', {}, `${dayLabel(day)}, ${path}: ${formatNumber(value)} tokens`)));
      base += value;
    }
    if (i % labelEvery === 0 || i === table.days.length - 1) {
      svg.append(svgEl('text', {
        class: 'axis', x: x + barW / 2, y: CHART_HEIGHT - 8, 'text-anchor': 'middle',
      }, dayLabel(day)));
    }
  });
  return svg;
}

function buildLegend(paths) {
  return paths.map((path) => el('li', {},
    el('span', { className: `swatch ${seriesClass(path)}`, 'aria-hidden': 'true' }), path));
}

function buildSpendingTable(table) {
  return el('table', { className: 'numbers-table' },
    el('caption', { text: 'Tokens per day (UTC) and path' }),
    el('thead', {}, el('tr', {},
      el('th', { scope: 'col', text: 'Day' }),
      table.paths.map((path) => el('th', { scope: 'col', text: path })),
      el('th', { scope: 'col', text: 'Total' }))),
    el('tbody', {}, table.days.map((day) => el('tr', {},
      el('th', { scope: 'row', text: day }),
      table.paths.map((path) => el('td', { className: 'num', text: formatNumber(table.tokens.get(day).get(path) || 0) })),
      el('td', { className: 'num', text: formatNumber(table.totals.get(day)) })))));
}

function buildBudgetRow(path, budget) {
  const limit = typeof budget.tokens_per_day === 'number' ? formatNumber(budget.tokens_per_day) : 'no limit';
  const paused = budget.paused
    ? `paused${budget.frees_at ? ` until ${formatEpoch(budget.frees_at)}` : ''}` : 'no';
  return el('tr', { dataset: { path } },
    el('th', { scope: 'row', text: path }),
    el('td', { className: 'num', text: `${formatNumber(budget.tokens_24h)} / ${limit}` }),
    el('td', { className: budget.paused ? 'error-text' : '', text: paused }));
}

let lastSpending = null;

function drawSpending() {
  if (!lastSpending) return;
  const box = document.getElementById('spending-chart-box');
  const table = tabulate(lastSpending.by_day || []);
  const width = Math.max(300, Math.round(box.clientWidth || 600));
  box.replaceChildren(buildChart(table, width));
  document.getElementById('spending-legend').replaceChildren(...buildLegend(table.paths));
  document.getElementById('spending-table-box').replaceChildren(buildSpendingTable(table));
}

export const spendingSection = {
  id: 'spending',
  setup() {
    let pending = null;
    window.addEventListener('resize', () => {
      clearTimeout(pending);
      pending = setTimeout(drawSpending, 200);
    });
  },
  async load() {
    lastSpending = await callApi(withQuery('/api/spending', { days: DAYS }));
    drawSpending();
    const rows = Object.entries(lastSpending.paths || {}).map(([path, b]) => buildBudgetRow(path, b));
    const body = document.querySelector('#budgets tbody');
    body.replaceChildren(...(rows.length ? rows
      : [el('tr', {}, el('td', { colSpan: 3, className: 'muted', text: 'No budgets.' }))]));
  },
};

// --- #proactive -------------------------------------------------------------------------------

function buildStatusTable(byPath) {
  const paths = Object.keys(byPath).sort();
  if (!paths.length) return el('p', { className: 'muted', text: 'No proactive messages in the last 24 hours.' });
  const statuses = [...new Set(paths.flatMap((p) => Object.keys(byPath[p])))].sort();
  return el('div', { className: 'table-scroll' }, el('table', { id: 'proactive-by-path' },
    el('caption', { text: 'Messages by path and what became of them' }),
    el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Path' }),
      statuses.map((s) => el('th', { scope: 'col', text: s })))),
    el('tbody', {}, paths.map((path) => el('tr', {},
      el('th', { scope: 'row', text: path }),
      statuses.map((s) => el('td', { className: 'num', text: formatNumber(byPath[path][s] || 0) })))))));
}

function buildReasons(reasons) {
  const entries = Object.entries(reasons).sort((a, b) => b[1] - a[1]);
  if (!entries.length) return el('p', { className: 'muted', text: 'Nothing held back.' });
  return el('div', {},
    el('h4', { id: 'held-back-title', text: 'Held back, by reason' }),
    el('ul', { className: 'reasons', 'aria-labelledby': 'held-back-title' },
      entries.map(([reason, n]) => el('li', {}, field(reason, formatNumber(n))))));
}

function buildProactiveItem(item) {
  return el('li', { className: 'proactive-message item', dataset: { id: item.id } },
    el('div', { className: 'item-head' },
      el('span', { className: `badge status-${item.status}`, text: item.status }), ' ',
      el('span', { className: 'muted', text: `${item.path} · ${formatEpoch(item.composed_at)}` })),
    el('p', { className: 'wrap', text: item.content }),
    item.reason ? el('p', { className: 'meta' }, field('reason', item.reason)) : null);
}

export const proactiveSection = {
  id: 'proactive',
  async load() {
    const data = await callApi(withQuery('/api/proactive', { limit: 20 }));
    const summary = data.last_24h || {};
    document.getElementById('proactive-summary').replaceChildren(
      buildStatusTable(summary.by_path || {}), buildReasons(summary.held_back_by_reason || {}));
    renderList(document.getElementById('proactive-list'), data.items || [], buildProactiveItem,
      'No proactive messages yet.');
  },
};
