// The brain dashboard's "Conversation" section: where the main channel's conversation stands as
// Chalie tracks it (GET /api/state): topic and focus, phase, the last turn's confidence and
// mode, the situation model, and recent topics with Chalie's feeling of knowing about each.

import { callApi } from './brain-api.js';
import { el, field, formatDecimal, formatEpoch, renderList } from './brain-ui.js';

function situationLines(situation) {
  const parts = [
    ['Open loops', situation.open_loops], ['People', situation.people],
    ['Places', situation.places], ['Decisions pending', situation.decisions],
  ];
  return parts.filter(([, items]) => items && items.length)
    .map(([label, items]) => el('li', { className: 'situation-item' },
      el('span', { className: 'field-label', text: `${label}: ` }),
      el('span', { className: 'wrap', text: items.join('; ') })));
}

function buildTopic(topic) {
  const fok = Math.min(5, Math.max(0, Number(topic.fok) || 0));
  return el('li', { className: 'topic item', dataset: { id: topic.id } },
    el('strong', { text: topic.name }), ' ',
    field('messages', String(topic.messages)), ' ',
    field('knows', `${formatDecimal(fok, 1)} of 5`),
    el('meter', { min: 0, max: 5, value: fok, 'aria-label': `Feeling of knowing about ${topic.name}` }),
    el('p', { className: 'meta muted', text: `last ${formatEpoch(topic.last_seen)}` }));
}

export const stateSection = {
  id: 'conversation',
  poll: true,
  async load() {
    const state = await callApi('/api/state?channel=main');
    const summary = document.getElementById('conversation-summary');
    const confidence = state.confidence == null ? '—' : formatDecimal(state.confidence);
    summary.replaceChildren(
      el('p', {},
        field('topic', state.topic ? `${state.topic.name} (${state.topic.streak} in a row)` : '—'),
        ' ', field('focus', state.focus ? state.focus.name : '—')),
      el('p', {}, field('phase', state.phase || '—'), ' ', field('confidence', confidence), ' ',
        field('last turn', state.mode || '—'), ' ', field('exchanges', String(state.exchanges))));
    const situation = document.getElementById('conversation-situation');
    const lines = situationLines(state.situation || {});
    situation.replaceChildren(...(lines.length ? lines
      : [el('li', { className: 'muted', text: 'Nothing noted yet.' })]));
    renderList(document.getElementById('topics-list'), state.topics || [], buildTopic,
      'No topics yet.');
  },
};
