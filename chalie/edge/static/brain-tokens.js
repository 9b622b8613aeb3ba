// The dashboard's API tokens (GET/POST/DELETE /api/tokens): the tokens programs use Chalie with
// (MCP clients at /mcp, OpenAI-compatible chat apps at /v1), each with its scopes, channel, when
// it was made and last used, its calls by protocol and its open sessions; a form to make one,
// whose answer shows the token this once, with ready-to-paste settings built from this page's
// own origin; and Revoke, after a confirmation (the token is refused at once).

import { callApi } from './brain-api.js';
import {
  el, field, renderList, forgetShown, askToConfirm, announce, copyText, formatEpoch,
} from './brain-ui.js';

const PROTOCOL_NAMES = { mcp: 'MCP', openai: 'OpenAI' };

/** "MCP 3 · OpenAI 0": the token's calls since the server started, by protocol. */
function callsInWords(calls) {
  const names = { ...PROTOCOL_NAMES };
  for (const key of Object.keys(calls || {})) names[key] ??= key;
  return Object.entries(names).map(([key, name]) => `${name} ${(calls || {})[key] ?? 0}`)
    .join(' · ');
}

function openInWords(open) {
  if (!open) return 'none';
  return open === 1 ? '1 session or stream' : `${open} sessions or streams`;
}

function buildToken(item, ctx) {
  return el('li', { className: 'token item', dataset: { id: item.id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title token-name', text: item.name }), ' ',
      item.scopes.map((scope) => el('span', { className: 'badge scope', text: scope }))),
    el('p', { className: 'meta' },
      field('channel', item.channel, 'token-channel'), ' ',
      field('made', formatEpoch(item.created_at), 'token-created'), ' ',
      field('last used', item.last_used_at == null ? 'never' : formatEpoch(item.last_used_at),
        'token-last-used'), ' ',
      field('calls', callsInWords(item.calls), 'token-calls'), ' ',
      field('open now', openInWords(item.open), 'token-open')),
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'revoke btn-danger', text: 'Revoke',
        'aria-label': `Revoke the token ${item.name}`,
        on: { click: (event) => revokeToken(item, event.currentTarget, ctx) },
      })));
}

async function revokeToken(item, button, ctx) {
  const open = item.open ? ` Its ${openInWords(item.open)} open now will end.` : '';
  const sure = await askToConfirm(
    `Revoke the token ${item.name}? Programs using it are refused from now on.${open}`, button);
  if (!sure) return;
  const done = await ctx.guard(async () => {
    await callApi(`/api/tokens/${encodeURIComponent(item.id)}`, { method: 'DELETE' });
    return true;
  });
  if (done) {
    announce(`Token ${item.name} revoked.`);
    if (document.getElementById('token-made').dataset.id === item.id) hideMadeToken();
  }
  forgetShown(document.getElementById('tokens-list'));
  await ctx.reload();
}

// --- the new token, shown once -------------------------------------------------------------

/** What to paste where: [id, title, text] for each kind of program. */
export function snippets(origin, token) {
  const mcpHttp = { mcpServers: { chalie: {
    type: 'http', url: `${origin}/mcp`, headers: { Authorization: `Bearer ${token}` } } } };
  const mcpStdio = { mcpServers: { chalie: {
    command: 'chalie', args: ['mcp', '--url', origin], env: { CHALIE_TOKEN: token } } } };
  return [
    ['mcp-http', 'MCP over HTTP (a client that speaks streamable HTTP)',
      JSON.stringify(mcpHttp, null, 2)],
    ['mcp-stdio', 'MCP over stdio (Claude Desktop and other clients that start a program)',
      JSON.stringify(mcpStdio, null, 2)],
    ['openai', 'OpenAI-compatible chat apps (Open WebUI and others)',
      `base URL: ${origin}/v1\nAPI key:  ${token}\nmodel:    chalie`],
  ];
}

function buildSnippet([id, title, text]) {
  const code = el('code', { id: `token-snippet-${id}`, text });
  return el('div', { className: 'snippet' },
    el('div', { className: 'snippet-head' },
      el('h4', { id: `token-snippet-${id}-title`, text: title }),
      el('button', {
        type: 'button', className: 'snippet-copy', text: 'Copy',
        'aria-label': `Copy the settings for ${title.split(' (')[0]}`,
        on: { click: () => copyText(code, 'The settings') },
      })),
    el('pre', {}, code));
}

function showMadeToken(made) {
  const box = document.getElementById('token-made');
  box.dataset.id = made.item.id;
  document.getElementById('token-made-name').textContent = made.item.name;
  document.getElementById('token-value').textContent = made.token;
  document.getElementById('token-snippets').replaceChildren(
    ...snippets(location.origin, made.token).map(buildSnippet));
  box.hidden = false;
  box.scrollIntoView({ block: 'nearest' });
  document.getElementById('token-made-title').focus({ preventScroll: true });
}

/** Take the token off the page (it cannot be shown again). */
function hideMadeToken() {
  const box = document.getElementById('token-made');
  box.hidden = true;
  delete box.dataset.id;
  document.getElementById('token-value').textContent = '';
  document.getElementById('token-snippets').replaceChildren();
}

// --- making one ------------------------------------------------------------------------------

async function makeToken(form, ctx) {
  const errorLine = document.getElementById('token-form-error');
  const name = form.elements.name;
  errorLine.textContent = '';
  name.removeAttribute('aria-invalid');
  const scopes = [...form.querySelectorAll('input[name="scope"]:checked')].map((box) => box.value);
  const button = document.getElementById('token-make');
  button.disabled = true;
  let made;
  try {
    made = await callApi('/api/tokens', {
      method: 'POST', body: { name: name.value.trim(), scopes } });
  } catch (error) {
    errorLine.textContent = error.message || 'The token was not made.';
    if (/^name\b/.test(errorLine.textContent)) name.setAttribute('aria-invalid', 'true');
    return;
  } finally {
    button.disabled = false;
  }
  form.reset();
  document.getElementById('token-add').open = false;
  showMadeToken(made);
  announce(`Token ${made.item.name} made: copy it now, it is shown only this once.`);
  forgetShown(document.getElementById('tokens-list'));
  await ctx.reload();
}

export const tokensSection = {
  id: 'tokens',
  poll: true, // last used, calls and open sessions move on
  setup(ctx) {
    const form = document.getElementById('token-form');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      makeToken(form, ctx);
    });
    document.getElementById('token-copy').addEventListener('click',
      () => copyText(document.getElementById('token-value'), 'The token'));
    document.getElementById('token-hide').addEventListener('click', () => {
      hideMadeToken();
      document.getElementById('tokens-title').focus();
    });
  },
  async load(ctx) {
    const { items } = await callApi('/api/tokens');
    renderList(document.getElementById('tokens-list'), items,
      (item) => buildToken(item, ctx),
      'No tokens yet: make one to let a program use Chalie.');
  },
};
