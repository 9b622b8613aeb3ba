// The dashboard's Telegram section (GET /api/telegram): whether the bot's token is set (a
// secret setting, telegram.token, set in Settings), the bot's @name once Telegram took the
// token or what keeps it off, "Pair a chat" (POST /api/telegram/pairing-code), which shows a
// one-time code, how to send it to the bot and a t.me link that sends it, and the paired chats,
// each with Unpair (DELETE /api/telegram/chats/<id>) after a confirmation. While a code is
// shown the section looks for the new chat every few seconds, and says when it is paired.

import { callApi } from './brain-api.js';
import {
  el, field, renderList, forgetShown, askToConfirm, announce, copyText, formatEpoch, clockTime,
} from './brain-ui.js';

const WATCH_MS = 3000; // how often the section looks for the chat a shown code pairs
const $ = (id) => document.getElementById(id);

let shownCode = null; // {code, expires_at, bot?, link?}: the code on the page
let chatsBefore = null; // the paired chat ids when the code was made
let watch = null;

function tokenSetting() {
  // The settings form names each field's group `setting-<key with - for . and _>`.
  return $('setting-telegram-token') ? '#setting-telegram-token' : '#settings';
}

function showState(state) {
  const line = $('telegram-state');
  const problem = $('telegram-problem');
  const pairing = $('telegram-pairing');
  problem.hidden = !state.error;
  problem.textContent = state.error || '';
  if (!state.configured) {
    line.replaceChildren('No bot yet. Make one with ',
      el('a', { href: 'https://t.me/BotFather', rel: 'noopener noreferrer', target: '_blank', text: '@BotFather' }),
      ' in Telegram, then give its token in ',
      el('a', { href: tokenSetting(), id: 'telegram-settings-link', text: 'Settings' }),
      ' (', el('code', { text: 'telegram.token' }), ').');
    pairing.hidden = true;
    hideCode();
    return;
  }
  line.replaceChildren(state.bot
    ? field('bot', `@${state.bot}`, 'telegram-bot')
    : el('span', { text: state.error ? 'The bot is off.' : 'Connecting to Telegram…' }));
  pairing.hidden = false;
}

function buildChat(chat, ctx) {
  return el('li', { className: 'telegram-chat item', dataset: { id: chat.chat_id } },
    el('div', { className: 'item-head' },
      el('strong', { className: 'item-title telegram-chat-name', text: chat.name })),
    el('p', { className: 'meta' },
      field('chat id', String(chat.chat_id), 'telegram-chat-id'), ' ',
      field('paired', formatEpoch(chat.paired_at), 'telegram-chat-paired')),
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'unpair btn-danger', text: 'Unpair',
        'aria-label': `Unpair the Telegram chat ${chat.name}`,
        on: { click: (event) => unpair(chat, event.currentTarget, ctx) },
      })));
}

async function unpair(chat, button, ctx) {
  const sure = await askToConfirm(
    `Unpair ${chat.name}? Chalie stops answering that chat and sends nothing more to it.`, button);
  if (!sure) return;
  const done = await ctx.guard(async () => {
    await callApi(`/api/telegram/chats/${encodeURIComponent(chat.chat_id)}`, { method: 'DELETE' });
    return true;
  });
  if (done) announce(`${chat.name} unpaired.`);
  forgetShown($('telegram-chats'));
  await ctx.reload();
}

// --- the one-time code ---------------------------------------------------------------------

function showCode(made) {
  shownCode = made;
  $('telegram-code').textContent = made.code;
  const bot = made.bot ? `@${made.bot}` : 'your bot';
  const until = clockTime(new Date(made.expires_at * 1000));
  $('telegram-code-how').textContent =
    `Send it to ${bot} in Telegram before ${until}, from the chat to pair (your private chat with the bot).`;
  const link = $('telegram-code-link');
  link.hidden = !made.link;
  if (made.link) {
    link.href = made.link;
    link.textContent = `Open ${bot} in Telegram with the code`;
  }
  $('telegram-code-box').hidden = false;
}

function hideCode() {
  shownCode = null;
  chatsBefore = null;
  $('telegram-code-box').hidden = true;
  $('telegram-code').textContent = '';
  if (watch) clearInterval(watch);
  watch = null;
}

async function makeCode(ctx, chats) {
  const button = $('telegram-pair');
  button.disabled = true;
  try {
    const made = await ctx.guard(() => callApi('/api/telegram/pairing-code', { method: 'POST' }));
    if (!made) return;
    chatsBefore = new Set(chats().map((c) => c.chat_id));
    showCode(made);
    announce(`Pairing code ${made.code.split('').join(' ')}: send it to the bot in Telegram.`);
    if (watch) clearInterval(watch);
    watch = setInterval(() => {
      if (!shownCode || Date.now() / 1000 > shownCode.expires_at) {
        hideCode();
        return;
      }
      ctx.reload();
    }, WATCH_MS);
  } finally {
    button.disabled = false;
  }
}

/** A chat paired since the code was made: the code did its work. */
function noticePaired(chats) {
  if (!shownCode || !chatsBefore) return;
  const added = chats.find((c) => !chatsBefore.has(c.chat_id));
  if (!added) return;
  hideCode();
  announce(`${added.name} is paired: Chalie answers it in Telegram now.`);
}

let lastChats = [];

export const telegramSection = {
  id: 'telegram',
  poll: true, // a chat pairs in Telegram, not on this page
  setup(ctx) {
    $('telegram-pair').addEventListener('click', () => makeCode(ctx, () => lastChats));
    $('telegram-code-copy').addEventListener('click',
      () => copyText($('telegram-code'), 'The pairing code'));
  },
  async load(ctx) {
    const state = await callApi('/api/telegram');
    lastChats = state.chats;
    showState(state);
    noticePaired(state.chats);
    renderList($('telegram-chats'), state.chats, (chat) => buildChat(chat, ctx),
      state.configured ? 'No chat paired yet: pair one with a code.' : 'No chat paired.');
  },
};
