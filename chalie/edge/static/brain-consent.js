// The person's consent on the dashboard: the calls Chalie holds for their approval (GET
// /api/approvals, those still waiting: read-only here, they are answered in the chat) and the
// tools they always allow (GET /api/tools/allowances), each with Revoke (DELETE
// /api/tools/allowances/<id>: the tool asks again from its next call on).

import { callApi } from './brain-api.js';
import { interfaceNames, providerWords } from './brain-names.js';
import {
  el, field, renderList, forgetShown, announce, formatEpoch, durationInWords, secondsSince,
} from './brain-ui.js';

// The path whose turn held a call (chalie/store/approval_rows.py HeldRow.path).
const PATH_WORDS = {
  dmn: "Chalie's own thinking",
  goal: 'a goal',
  scheduled: 'a scheduled prompt',
  user: "a paired program's message",
};

/** A call's arguments (JSON text) as indented JSON; the text itself when it is not JSON. */
function prettyArgs(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return String(args ?? '');
  }
}

function expiresInWords(expiresAt) {
  const left = -secondsSince(expiresAt);
  return `${formatEpoch(expiresAt)} (in ${durationInWords(Math.max(60, left))})`;
}

// --- #approvals ---------------------------------------------------------------------------

function buildHeldCall(item) {
  const args = prettyArgs(item.args);
  return el('li', { className: 'held-call item', dataset: { id: item.id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title' }, el('code', { className: 'held-tool', text: item.tool }))),
    el('p', { className: 'wrap held-reason' }, field('why', item.reason)),
    el('p', { className: 'meta' },
      field('asked by', PATH_WORDS[item.path] || item.path, 'held-path'), ' ',
      field('program', item.program, 'held-program'), ' ',
      field('asked', formatEpoch(item.created_at), 'held-created'), ' ',
      field('expires', item.expires_words, 'held-expires')),
    el('details', { className: 'args-details' },
      el('summary', { text: 'Arguments' }),
      args && args !== '{}'
        ? el('pre', { className: 'wrap-pre held-args' }, el('code', { text: args }))
        : el('p', { className: 'muted', text: 'No arguments.' })));
}

export const approvalsSection = {
  id: 'approvals',
  poll: true, // calls are held, answered and expire on their own
  async load() {
    const [{ items }, names] = await Promise.all([
      callApi('/api/approvals?limit=1000'), interfaceNames()]);
    // the names in words go into what the list compares, so a renamed program shows anew
    const waiting = (items || []).filter((item) => item.status === 'waiting').map((item) => ({
      ...item, program: providerWords(item.provider, names),
      expires_words: expiresInWords(item.expires_at),
    }));
    renderList(document.getElementById('approvals-list'), waiting, buildHeldCall,
      'Nothing waits for your approval.');
  },
};

// --- #allowances --------------------------------------------------------------------------

function buildAllowance(item, ctx) {
  const { program } = item;
  return el('li', { className: 'allowance item', dataset: { id: item.id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title' },
        el('code', { className: 'allowance-tool', text: item.shown_as }))),
    el('p', { className: 'meta' },
      field('program', program, 'allowance-program'), ' ',
      item.tool !== item.shown_as ? [field('its own name', item.tool), ' '] : null,
      field('allowed', formatEpoch(item.created_at), 'allowance-created')),
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'revoke btn-danger', text: 'Revoke',
        'aria-label': `Revoke: ${item.shown_as} (${program}) asks you again before it runs`,
        on: { click: (event) => revokeAllowance(item, event.currentTarget, ctx) },
      })));
}

// Revoking makes Chalie ask again: nothing to confirm first. While it is under way the button
// says so (aria-disabled, not disabled: the keyboard focus stays, and moves to the heading
// once the item is gone).
async function revokeAllowance(item, button, ctx) {
  if (button.getAttribute('aria-disabled') === 'true') return;
  button.setAttribute('aria-disabled', 'true');
  const done = await ctx.guard(async () => {
    await callApi(`/api/tools/allowances/${encodeURIComponent(item.id)}`, { method: 'DELETE' });
    return true;
  });
  button.removeAttribute('aria-disabled');
  if (done) announce(`${item.shown_as} asks you again before it runs.`);
  forgetShown(document.getElementById('allowances-list'));
  await ctx.reload();
}

export const allowancesSection = {
  id: 'allowances',
  poll: true, // "Always allow this tool" in the chat adds one
  async load(ctx) {
    const [{ items }, names] = await Promise.all([
      callApi('/api/tools/allowances'), interfaceNames()]);
    const shown = (items || []).map((item) => ({
      ...item, program: providerWords(item.provider, names) }));
    renderList(document.getElementById('allowances-list'), shown,
      (item) => buildAllowance(item, ctx),
      'No tool is always allowed: each one that needs your approval asks you first.');
  },
};
