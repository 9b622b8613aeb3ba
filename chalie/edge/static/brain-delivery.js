// The dashboard's "Notifications away from the page": the notification services Chalie sends
// to through Apprise (notify.urls, shown masked: GET /api/settings never gives their secrets),
// each with "Send a test" (POST /api/notify/test) and Remove, a form to add one, and "Send a
// test to all"; the kinds they get (notify.kinds; PATCH /api/settings on each change); the
// devices that take Web Push (GET /api/push/subscriptions), each with how its latest pushes
// went and Remove (DELETE /api/push/subscriptions/<id>); and the delivery log (GET
// /api/notify/log) grouped by target, each message with its outcome.
//
// notify.urls is saved whole: the page sends the masked forms it was shown for the URLs it
// keeps (the server keeps the URL each one stands for) and the new URL as typed.

import { callApi, withQuery } from './brain-api.js';
import { loadSettings, envName } from './settings-meta.js';
import {
  el, field, renderList, forgetShown, askToConfirm, announce, formatEpoch,
} from './brain-ui.js';

const URLS = 'notify.urls';
const KINDS = 'notify.kinds';
const LOG_LIMIT = 200;
const PER_TARGET = 5; // the latest deliveries shown for each target

const KIND_WORDS = {
  notifications: 'message',
  escalations: 'approval',
  goal_results: 'goal result',
  scheduled_results: 'scheduled result',
};

const SERVICE_WORDS = { webpush: 'Web Push', telegram: 'Telegram' };

const $ = (id) => document.getElementById(id);

let shown = { urls: [], locked: false, kinds: [], kindsLocked: false };
let savingKinds = false;

// --- the notification services (notify.urls) ---------------------------------------------------

function buildUrl(url, ctx) {
  return el('li', { className: 'delivery-url item', dataset: { name: url } },
    el('div', { className: 'item-head' },
      el('code', { className: 'item-title delivery-url-text', text: url })),
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'delivery-url-test', text: 'Send a test',
        'aria-label': `Send a test to ${url}`,
        on: { click: (event) => sendTest(url, event.currentTarget, ctx) },
      }),
      shown.locked ? null : el('button', {
        type: 'button', className: 'delivery-url-remove btn-danger', text: 'Remove',
        'aria-label': `Remove ${url}: it gets no more notifications`,
        on: { click: (event) => removeUrl(url, event.currentTarget, ctx) },
      })));
}

function showUrls(ctx) {
  renderList($('delivery-urls'), shown.urls, (url) => buildUrl(url, ctx),
    'No notification service yet: add an Apprise URL below.');
  $('delivery-url-form').hidden = shown.locked;
  $('delivery-test-all').disabled = shown.urls.length === 0;
  $('delivery-urls-locked').hidden = !shown.locked;
  $('delivery-urls-locked').textContent = shown.locked
    ? `Set by the environment (${envName(URLS)}): change them there.` : '';
}

async function saveUrls(urls) {
  return callApi('/api/settings', { method: 'PATCH', body: { [URLS]: urls } });
}

async function addUrl(event, ctx) {
  event.preventDefault();
  const input = $('delivery-url');
  const error = $('delivery-url-error');
  const url = input.value.trim();
  error.textContent = '';
  input.removeAttribute('aria-invalid');
  if (!url) return;
  const button = event.submitter || $('delivery-url-add');
  button.disabled = true;
  try {
    await saveUrls([...shown.urls, url]);
    input.value = '';
    announce('Notification service added.');
    forgetShown($('delivery-urls'));
    await ctx.reload();
  } catch (problem) {
    error.textContent = problem.message;
    input.setAttribute('aria-invalid', 'true');
  } finally {
    button.disabled = false;
  }
}

async function removeUrl(url, button, ctx) {
  const sure = await askToConfirm(`Remove ${url}? Chalie sends nothing more there; adding it `
    + 'again needs the whole URL, secret included.', button);
  if (!sure) return;
  const left = [...shown.urls];
  const at = left.indexOf(url);
  if (at >= 0) left.splice(at, 1);
  const done = at >= 0 && await ctx.guard(async () => { await saveUrls(left); return true; });
  if (done) announce(`${url} removed.`);
  forgetShown($('delivery-urls'));
  await ctx.reload();
}

// --- "Send a test" ------------------------------------------------------------------------------

function buildResult(result) {
  const ok = result.result === 'sent';
  return el('li', { className: `delivery-test-result ${ok ? 'ok-text' : 'error-text'}`,
    dataset: { name: result.target } },
  el('code', { text: result.target }), ` (${result.service}): `,
  ok ? 'sent' : `failed: ${result.error || 'no reason given'}`);
}

async function sendTest(url, button, ctx) {
  const list = $('delivery-test-results');
  button.disabled = true;
  list.replaceChildren(el('li', { className: 'muted', text: 'Sending a test…' }));
  const answer = await ctx.guard(() => callApi('/api/notify/test', {
    method: 'POST', body: url ? { url } : {} }));
  button.disabled = url ? false : shown.urls.length === 0;
  if (!answer) { list.replaceChildren(); return; }
  list.replaceChildren(...answer.results.map(buildResult));
  const sent = answer.results.filter((r) => r.result === 'sent').length;
  announce(`Test sent to ${sent} of ${answer.results.length}.`);
}

// --- the kinds they get (notify.kinds) ----------------------------------------------------------

function showKinds() {
  if (savingKinds) return;
  for (const box of document.querySelectorAll('#delivery-kinds input[name="kind"]')) {
    box.checked = shown.kinds.includes(box.value);
    box.disabled = shown.kindsLocked;
  }
}

async function saveKinds(ctx) {
  const boxes = [...document.querySelectorAll('#delivery-kinds input[name="kind"]')];
  const kinds = boxes.filter((box) => box.checked).map((box) => box.value);
  const result = $('delivery-kinds-result');
  result.textContent = '';
  savingKinds = true;
  const done = await ctx.guard(async () => {
    await callApi('/api/settings', { method: 'PATCH', body: { [KINDS]: kinds } });
    return true;
  });
  savingKinds = false;
  if (done) {
    shown.kinds = kinds;
    result.textContent = 'Saved.';
  }
  showKinds();
}

// --- Web Push devices ---------------------------------------------------------------------------

function when(seconds) {
  return seconds === null || seconds === undefined ? 'never' : formatEpoch(seconds);
}

function buildDevice(item, ctx) {
  const name = item.name || 'A device';
  const failing = item.failures > 0 || item.last_error;
  return el('li', { className: 'delivery-device item', dataset: { id: item.id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title', text: name }),
      failing ? el('span', { className: 'badge offline', text: 'failing' }) : null),
    el('p', { className: 'meta' },
      field('last sent', when(item.last_sent_at), 'device-sent'), ' ',
      field('failures', String(item.failures ?? 0), 'device-failures'),
      item.retry_at ? [' ', field('next try', when(item.retry_at), 'device-retry')] : null),
    item.last_error ? el('p', { className: 'error-text wrap device-error', text: item.last_error }) : null,
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'delivery-device-remove btn-danger', text: 'Remove',
        'aria-label': `Remove ${name}: it gets no more notifications`,
        on: { click: (event) => removeDevice(item, event.currentTarget, ctx) },
      })));
}

async function removeDevice(item, button, ctx) {
  const name = item.name || 'this device';
  const sure = await askToConfirm(`Remove ${name}? It gets no more notifications until it `
    + 'turns them on again in the settings.', button);
  if (!sure) return;
  const done = await ctx.guard(async () => {
    await callApi(`/api/push/subscriptions/${encodeURIComponent(item.id)}`, { method: 'DELETE' });
    return true;
  });
  if (done) announce(`${name} removed.`);
  forgetShown($('delivery-devices'));
  await ctx.reload();
}

// --- the delivery log, by target ----------------------------------------------------------------

function timesFailed(n) {
  return n === 1 ? 'failed once' : `failed ${n} times`;
}

/** How a delivery went, in words: [status class, words]. */
export function outcomeOf(item) {
  switch (item.status) {
    case 'sent': return ['sent', `sent ${when(item.sent_at)}`];
    case 'pending':
      return item.attempts > 0
        ? ['retrying', `${timesFailed(item.attempts)}, next try ${when(item.next_at)}`]
        : ['pending', 'waiting to be sent'];
    case 'held': return ['held', `held for quiet hours, until ${when(item.next_at)}`];
    case 'failed': return ['failed', `failed, given up after ${item.attempts} tries`];
    case 'gone': return ['gone', 'gone: the target no longer exists'];
    case 'dropped': return ['dropped', 'dropped'];
    case 'skipped': return ['skipped', 'skipped: a page of yours was open'];
    default: return [item.status, item.status];
  }
}

function buildDelivery(item) {
  const [status, words] = outcomeOf(item);
  return el('li', { className: 'delivery', dataset: { id: item.id, status: item.status } },
    el('div', { className: 'item-head' },
      el('span', { className: `badge status-${status}`, text: status }), ' ',
      el('span', { className: 'delivery-title', text: item.title })),
    el('p', { className: 'meta' },
      field('what', KIND_WORDS[item.kind] || item.kind, 'delivery-kind'), ' ',
      field('made', formatEpoch(item.created_at), 'delivery-made'), ' ',
      el('span', { className: 'delivery-outcome', text: words })),
    item.last_error
      ? el('p', { className: `wrap delivery-error ${status === 'sent' ? 'muted' : 'error-text'}`,
        text: item.last_error })
      : null);
}

function buildTarget(target) {
  return el('li', { className: 'delivery-target item', dataset: { name: target.name } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title delivery-target-name', text: target.target_name }), ' ',
      el('span', { className: 'badge', text: SERVICE_WORDS[target.service] || target.service })),
    el('ul', { className: 'delivery-list' }, target.items.map(buildDelivery)));
}

/** The log's items (newest first) as targets, the most recently used first. */
export function byTarget(items) {
  const targets = new Map();
  for (const item of items) {
    const name = `${item.service} ${item.target_name}`;
    if (!targets.has(name)) {
      targets.set(name, { name, service: item.service, target_name: item.target_name, items: [] });
    }
    const target = targets.get(name);
    if (target.items.length < PER_TARGET) target.items.push(item);
  }
  return [...targets.values()];
}

// --- the section --------------------------------------------------------------------------------

export const deliverySection = {
  id: 'delivery',
  poll: true, // deliveries go out, fail and are tried again on their own
  async load(ctx) {
    const [{ settings }, log, devices] = await Promise.all([
      loadSettings(),
      callApi(withQuery('/api/notify/log', { limit: LOG_LIMIT })),
      callApi('/api/push/subscriptions'),
    ]);
    const urls = settings.get(URLS);
    const kinds = settings.get(KINDS);
    shown = {
      urls: urls?.value || [], locked: Boolean(urls?.locked),
      kinds: kinds?.value || [], kindsLocked: Boolean(kinds?.locked),
    };
    showUrls(ctx);
    showKinds();
    renderList($('delivery-devices'), devices.items || [], (item) => buildDevice(item, ctx),
      'No device takes Web Push: turn on "Notify me on this device" in the settings.');
    renderList($('delivery-log'), byTarget(log.items || []), buildTarget,
      'Nothing was sent away from the page yet.');
  },
  setup(ctx) {
    $('delivery-url-form').addEventListener('submit', (event) => addUrl(event, ctx));
    $('delivery-test-all').addEventListener('click', (event) => sendTest(null, event.currentTarget, ctx));
    for (const box of document.querySelectorAll('#delivery-kinds input[name="kind"]')) {
      box.addEventListener('change', () => saveKinds(ctx));
    }
  },
};
