// Names for the dashboard: a paired interface's name where the server gives its id (a signal's
// sender, a turn's channel "interface.<id>"), "you" for the chat page ("__chat_ui__"), and
// "program <name>" for a turn on an API token's channel ("token.<name>"). GET /api/interfaces
// says id -> name; a list shown by a section asks for it on each load.

import { callApi } from './brain-api.js';

const CHAT_UI = '__chat_ui__';

/** id -> name of every paired interface (empty when the list cannot be read). */
export async function interfaceNames() {
  try {
    const { items } = await callApi('/api/interfaces');
    return new Map((items || []).map((item) => [String(item.id), String(item.name)]));
  } catch (error) {
    if (error && error.status === 401) throw error;
    return new Map();
  }
}

/** Who sent a signal, in words. */
export function senderName(sender, names) {
  if (!sender) return '—';
  if (sender === CHAT_UI) return 'you (chat page)';
  return names.get(String(sender)) || String(sender);
}

/** Where a turn came from: [label, words] for its channel. */
export function channelWords(channel, names) {
  const text = String(channel || '');
  if (text.startsWith('interface.')) {
    const id = text.slice('interface.'.length);
    return ['from', names.get(id) || `a program no longer paired (${id.slice(0, 8)}…)`];
  }
  if (text.startsWith('token.')) return ['from', `program ${text.slice('token.'.length)}`];
  return ['channel', text || '—'];
}
