// Names for the dashboard: a paired interface's name where the server gives its id (a signal's
// sender, a turn's channel "interface.<id>"), "you" for the chat page ("__chat_ui__"), and
// "program <name>" for a turn on an API token's channel ("token.<name>"), and the program that
// provides a tool ("interface:<id>", "mcp:<name>", "chalie"). GET /api/interfaces says
// id -> name; a list shown by a section asks for it on each load.

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

function interfaceName(id, names) {
  return names.get(id) || `a program no longer paired (${id.slice(0, 8)}…)`;
}

/** Where a turn came from: [label, words] for its channel. */
export function channelWords(channel, names) {
  const text = String(channel || '');
  if (text.startsWith('interface.')) {
    return ['from', interfaceName(text.slice('interface.'.length), names)];
  }
  if (text.startsWith('token.')) return ['from', `program ${text.slice('token.'.length)}`];
  return ['channel', text || '—'];
}

/** The program that provides a tool, in words: a paired interface's name, "MCP server
 *  <name>", or "Chalie" for its own tools (provider "chalie", or none). */
export function providerWords(provider, names) {
  const text = String(provider || 'chalie');
  if (text === 'chalie') return 'Chalie';
  if (text.startsWith('interface:')) return interfaceName(text.slice('interface:'.length), names);
  if (text.startsWith('mcp:')) return `MCP server ${text.slice('mcp:'.length)}`;
  return text;
}
