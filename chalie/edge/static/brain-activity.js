// The brain dashboard's live activity: world-state signals with their salience and who sent
// them (by name), and recent turns with where they came from and "What went in": every LLM
// request of a turn as it was sent (prompt snapshots), for a turn that made any.

import { callApi, withQuery } from './brain-api.js';
import {
  el, field, renderList, ageInWords, formatEpoch, formatDecimal, formatNumber, shorten,
} from './brain-ui.js';
import { channelWords, interfaceNames, senderName } from './brain-names.js';

const TURNS_SHOWN = 20;

// --- #signals ---------------------------------------------------------------------------------

function signalFrom(signal) {
  const from = signal.from_name;
  const source = signal.source && signal.source !== from && signal.source !== signal.sender
    ? [' ', field('source', signal.source)] : null;
  return [field('from', from), source];
}

function buildSignal(signal) {
  const salience = Math.min(1, Math.max(0, Number(signal.salience) || 0));
  return el('li', { className: 'signal item', dataset: { id: signal.id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'signal-type', text: signal.signal_type }),
      signal.topic ? [' ', el('span', { className: 'badge', text: signal.topic })] : null),
    el('p', { className: 'signal-content wrap', text: signal.content }),
    el('div', { className: 'salience' },
      el('span', { className: 'field-label', text: 'salience: ' }),
      el('span', { className: 'salience-value', text: formatDecimal(salience) }),
      el('meter', { min: 0, max: 1, value: salience, 'aria-label': 'Salience' })),
    el('p', { className: 'meta' },
      signalFrom(signal), ' ',
      el('span', { className: 'muted', text: `received ${ageInWords(signal.age_s)}` })));
}

export const signalsSection = {
  id: 'signals',
  poll: true,
  async load() {
    const [{ items }, names] = await Promise.all([callApi('/api/signals'), interfaceNames()]);
    const shown = items.map((signal) => ({ ...signal, from_name: senderName(signal.sender, names) }));
    renderList(document.getElementById('signals-list'), shown, buildSignal,
      'No signals right now.');
  },
};

// --- #turns -----------------------------------------------------------------------------------

function turnWhen(turn) {
  return formatEpoch(turn.finished_at ?? turn.started_at);
}

// "What went in" shows the turn's LLM requests: a turn that made none has nothing to show.
function promptsButton(turn, said, ctx) {
  if (!(Number(turn.llm_calls) > 0)) return null;
  return el('div', { className: 'actions' },
    el('button', {
      type: 'button', className: 'prompts', text: 'What went in',
      'aria-label': `What went into the turn of ${turnWhen(turn)}: ${shorten(said, 40)}`,
      on: { click: (event) => showPrompts(turn, event.currentTarget, ctx) },
    }));
}

function buildTurn(turn, ctx) {
  const said = turn.user_text ? shorten(turn.user_text, 80) : `(${turn.source || 'no text'})`;
  const [label, where] = turn.channel_words;
  return el('li', { className: 'turn item', dataset: { id: turn.id } },
    el('div', { className: 'item-head' },
      el('span', { className: 'turn-when muted', text: turnWhen(turn) }), ' ',
      el('span', { className: `badge outcome-${turn.outcome}`, text: turn.outcome || '—' })),
    el('p', { className: 'turn-text wrap', text: said }),
    el('p', { className: 'meta' },
      field(label, where), ' ',
      field('tokens', formatNumber(turn.tokens_total)), ' ',
      field('LLM calls', formatNumber(turn.llm_calls)),
      typeof turn.response_time_s === 'number'
        ? [' ', field('time', `${turn.response_time_s.toFixed(1)} s`)] : null),
    promptsButton(turn, said, ctx));
}

function contentText(content) {
  if (typeof content === 'string') return content;
  return JSON.stringify(content, null, 2);
}

function buildMessage(message) {
  const images = message.images && message.images.length
    ? el('p', {
      className: 'meta',
      text: `${message.images.length} image(s): ${message.images.map((i) => i.media_type).join(', ')}`,
    })
    : null;
  return el('div', { className: 'prompt-message' },
    el('p', { className: 'prompt-role' }, el('strong', { text: message.role })),
    el('pre', { className: 'wrap-pre' }, contentText(message.content)),
    images);
}

function buildPrompt(prompt) {
  const tools = prompt.tools || [];
  return el('article', { className: 'prompt' },
    el('h4', { text: `Call ${prompt.call}: ${prompt.purpose}` }),
    el('p', { className: 'meta', text: formatEpoch(prompt.created_at) }),
    el('p', { className: 'prompt-role' }, el('strong', { text: 'system' })),
    el('pre', { className: 'wrap-pre' }, prompt.system || ''),
    (prompt.messages || []).map(buildMessage),
    el('p', { className: 'prompt-tools wrap' },
      field('tools', tools.length ? tools.map((t) => t.name).join(', ') : 'none')),
    prompt.response_format
      ? el('p', { className: 'meta' }, field('response format', prompt.response_format.name))
      : null);
}

let promptOpener = null;

function closePrompts() {
  const view = document.getElementById('prompt-view');
  view.hidden = true;
  view.replaceChildren();
  if (promptOpener && promptOpener.isConnected) promptOpener.focus();
  promptOpener = null;
}

async function showPrompts(turn, button, ctx) {
  const snapshots = await ctx.guard(() =>
    callApi(`/api/turns/${encodeURIComponent(turn.id)}/prompts`));
  if (!snapshots) return;
  promptOpener = button;
  const view = document.getElementById('prompt-view');
  const title = el('h3', {
    id: 'prompt-view-title', tabindex: '-1',
    text: `What went into the turn of ${turnWhen(turn)}`,
  });
  view.replaceChildren(
    el('div', { className: 'section-head' }, title,
      el('button', { type: 'button', id: 'prompt-close', text: 'Close', on: { click: closePrompts } })),
    el('p', { className: 'meta wrap' },
      `${snapshots.prompts.length} LLM request(s) for turn `, el('code', { text: snapshots.turn_id })),
    ...snapshots.prompts.map(buildPrompt));
  view.setAttribute('role', 'region');
  view.setAttribute('aria-labelledby', 'prompt-view-title');
  view.hidden = false;
  title.focus();
}

export const turnsSection = {
  id: 'turns',
  setup() {
    document.getElementById('prompt-view').addEventListener('keydown', (event) => {
      if (event.key === 'Escape') closePrompts();
    });
  },
  async load(ctx) {
    const [{ items }, names] = await Promise.all([
      callApi(withQuery('/api/turns', { limit: TURNS_SHOWN })), interfaceNames()]);
    const shown = items.map((turn) => ({ ...turn, channel_words: channelWords(turn.channel, names) }));
    renderList(document.getElementById('turns-list'), shown,
      (turn) => buildTurn(turn, ctx), 'No turns yet.');
  },
};
