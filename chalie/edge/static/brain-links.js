// Brain dashboard sections for what Chalie is connected to: the pairing key, paired
// interfaces (with their tools), MCP servers and broadcast-stream subscriptions.

import { callApi } from './brain-api.js';
import {
  el, field, onlineBadge, renderList, forgetShown, loadWhenOpened, askToConfirm, announce,
  copyText, clockTime, durationInWords, formatEpoch,
} from './brain-ui.js';

// --- #pairing ---------------------------------------------------------------------------------

let pairingKey = null; // {pairing_key, expires_at}

function showPairingExpiry() {
  if (!pairingKey) return;
  const expiry = document.getElementById('pairing-expiry');
  const at = new Date(pairingKey.expires_at * 1000);
  const left = pairingKey.expires_at - Date.now() / 1000;
  expiry.textContent = left > 0
    ? `expires at ${clockTime(at)} (in ${durationInWords(Math.max(60, left))})`
    : `expired at ${clockTime(at)}; generate a new one`;
  expiry.classList.toggle('error-text', left <= 0);
}

export const pairingSection = {
  id: 'pairing',
  poll: true, // no request: only the "in N min" of the shown key moves on
  setup(ctx) {
    const button = document.getElementById('pairing-generate');
    button.addEventListener('click', () => ctx.guard(async () => {
      button.disabled = true;
      try {
        pairingKey = await callApi('/api/interfaces/pairing-key', { method: 'POST' });
      } finally {
        button.disabled = false;
      }
      document.getElementById('pairing-key').textContent = pairingKey.pairing_key;
      document.getElementById('pairing-result').hidden = false;
      showPairingExpiry();
      announce('Pairing key generated.');
    }));
    document.getElementById('pairing-copy').addEventListener('click',
      () => copyText(document.getElementById('pairing-key'), 'The pairing key'));
  },
  async load() {
    showPairingExpiry();
  },
};

// --- #interfaces ------------------------------------------------------------------------------

function toolNames(names) {
  return names.length ? names.join(', ') : 'none';
}

const SIGNALS_FROM = { pairing: 'declared at pairing', capabilities: 'from its /capabilities' };

/** The signal types an interface may emit, and where they were declared:
 * "weather_update, rain (from its /capabilities)", "any type (none declared)". */
function signalTypes(item) {
  if (item.signals_from === 'any') return 'any type (none declared)';
  const types = item.signals.includes('*') ? 'any type' : item.signals.join(', ') || 'none';
  return `${types} (${SIGNALS_FROM[item.signals_from]})`;
}

function buildInterface(item, ctx) {
  const details = el('details', { className: 'tools-details' },
    el('summary', { text: 'Tool descriptions' }),
    el('div', { className: 'tools-body muted', text: 'Loading…' }));
  loadWhenOpened(details, async () => {
    const body = details.querySelector('.tools-body');
    try {
      const detail = await callApi(`/api/interfaces/${encodeURIComponent(item.id)}`);
      body.className = 'tools-body';
      body.replaceChildren(buildToolList(detail.tools));
    } catch (error) {
      body.className = 'tools-body error-text';
      body.textContent = error.message;
      throw error;
    }
  });
  return el('li', { className: 'interface item', dataset: { id: item.id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title', text: item.name }), ' ', onlineBadge(item.online)),
    el('p', { className: 'meta' },
      field('address', `${item.host}:${item.port}`), ' ',
      field('version', item.version || '—'), ' ',
      field('signals', signalTypes(item))),
    item.last_error
      ? el('p', { className: 'error-text wrap', text: `Last error: ${item.last_error}` }) : null,
    el('p', { className: 'wrap' }, field('tools', toolNames(item.tools))),
    item.tools.length ? details : null,
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'refresh-interface', text: 'Refresh capabilities',
        'aria-label': `Refresh the capabilities of ${item.name}`,
        on: { click: (event) => refreshInterface(item, event.currentTarget, ctx) },
      }),
      el('button', {
        type: 'button', className: 'unpair btn-danger', text: 'Unpair',
        'aria-label': `Unpair ${item.name}`,
        on: { click: (event) => unpairInterface(item, event.currentTarget, ctx) },
      })));
}

/** name + description (+ danger class) of each tool, as a definition list. */
export function buildToolList(tools) {
  if (!tools || !tools.length) return el('p', { className: 'muted', text: 'No tools.' });
  return el('dl', { className: 'tool-list' }, tools.flatMap((tool) => [
    el('dt', {},
      el('code', { text: tool.name }),
      tool.danger && tool.danger !== 'safe'
        ? [' ', el('span', { className: `badge danger-${tool.danger}`, text: tool.danger })] : null),
    el('dd', { className: 'wrap', text: tool.description || '—' }),
  ]));
}

async function refreshInterface(item, button, ctx) {
  button.disabled = true;
  await ctx.guard(async () => {
    await callApi(`/api/interfaces/${encodeURIComponent(item.id)}/refresh`, { method: 'POST' });
    announce(`${item.name}: capabilities refreshed.`);
  });
  button.disabled = false;
  forgetShown(document.getElementById('interfaces-list'));
  await ctx.reload();
}

async function unpairInterface(item, button, ctx) {
  const sure = await askToConfirm(
    `Unpair ${item.name}? Its tools go at once and its token stops working.`, button);
  if (!sure) return;
  await ctx.guard(async () => {
    await callApi(`/api/interfaces/${encodeURIComponent(item.id)}`, { method: 'DELETE' });
    announce(`${item.name} unpaired.`);
  });
  await ctx.reload();
}

export const interfacesSection = {
  id: 'interfaces',
  poll: true,
  async load(ctx) {
    const { items } = await callApi('/api/interfaces');
    renderList(document.getElementById('interfaces-list'), items,
      (item) => buildInterface(item, ctx),
      'No programs paired yet: generate a pairing key to pair one.');
  },
};

// --- #mcp -------------------------------------------------------------------------------------

function buildMcpServer(server) {
  const tools = server.tools || [];
  return el('li', { className: 'mcp-server item', dataset: { name: server.name } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title', text: server.name }), ' ', onlineBadge(server.online)),
    el('p', { className: 'meta' }, field('transport', server.transport)),
    el('p', { className: 'wrap' }, field('tools', toolNames(tools.map((t) => t.name)))),
    tools.length
      ? el('details', { className: 'tools-details' },
        el('summary', { text: 'Tool descriptions' }), buildToolList(tools))
      : null);
}

export const mcpSection = {
  id: 'mcp',
  poll: true,
  async load() {
    const { items } = await callApi('/api/mcp');
    renderList(document.getElementById('mcp-list'), items, buildMcpServer,
      'No MCP servers configured.');
  },
};

// --- #subscriptions ---------------------------------------------------------------------------

function buildSubscription(item, ctx) {
  return el('li', { className: 'subscription item', dataset: { id: item.id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title', text: item.name }), ' ',
      onlineBadge(item.connected, 'connected', 'not connected')),
    el('p', { className: 'wrap' }, el('code', { text: item.url })),
    el('p', { className: 'meta' },
      field('signals', item.signals.join(', ')), ' ',
      field('accepted', String(item.accepted)), ' ',
      field('rejected', String(item.rejected)),
      item.connected_at ? [' ', field('since', formatEpoch(item.connected_at))] : null),
    item.last_error
      ? el('p', { className: 'error-text wrap', text: `Last error: ${item.last_error}` }) : null,
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'delete btn-danger', text: 'Delete',
        'aria-label': `Delete the subscription ${item.name}`,
        on: { click: (event) => deleteSubscription(item, event.currentTarget, ctx) },
      })));
}

async function deleteSubscription(item, button, ctx) {
  const sure = await askToConfirm(
    `Delete the subscription ${item.name}? Chalie stops reading that stream.`, button);
  if (!sure) return;
  await ctx.guard(async () => {
    await callApi(`/api/subscriptions/${encodeURIComponent(item.id)}`, { method: 'DELETE' });
    announce(`Subscription ${item.name} deleted.`);
  });
  await ctx.reload();
}

async function addSubscription(form, ctx) {
  const signals = form.elements.signals.value.split(',').map((s) => s.trim()).filter(Boolean);
  const body = { name: form.elements.name.value.trim(), url: form.elements.url.value.trim(), signals };
  const created = await ctx.guard(() => callApi('/api/subscriptions', { method: 'POST', body }));
  if (!created) return;
  form.reset();
  announce(`Subscription ${created.name} added.`);
  await ctx.reload();
}

export const subscriptionsSection = {
  id: 'subscriptions',
  poll: true, // its accepted / rejected counts move on their own
  setup(ctx) {
    const form = document.getElementById('subscription-form');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      addSubscription(form, ctx);
    });
  },
  async load(ctx) {
    const { items } = await callApi('/api/subscriptions');
    renderList(document.getElementById('subscriptions-list'), items,
      (item) => buildSubscription(item, ctx), 'No subscriptions yet.');
  },
};
