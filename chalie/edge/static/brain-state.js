// The brain dashboard's "Conversation" section: where the main channel's conversation stands as
// Chalie tracks it (GET /api/state): topic and focus, phase, the last turn's confidence and
// mode, the situation model, recent topics with Chalie's feeling of knowing about each, and
// what it has learned of how the person writes (adaptive traits), the concepts recent talk
// activates, and thoughts from idle time that may surface in the next answer (drift gists).

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
    if (state.summary) lines.unshift(el('li', { className: 'situation-summary wrap', text: state.summary }));
    situation.replaceChildren(...(lines.length ? lines
      : [el('li', { className: 'muted', text: 'Nothing noted yet.' })]));
    renderList(document.getElementById('topics-list'), state.topics || [], buildTopic,
      'No topics yet.');
    const activated = document.getElementById('concepts-list');
    activated.replaceChildren(...((state.concepts || []).length
      ? state.concepts.map((c) => el('li', { className: 'concept', dataset: { id: String(c.id) } },
        el('strong', { text: c.name }), ' ', field('activation', formatDecimal(c.activation))))
      : [el('li', { className: 'muted', text: 'No concepts yet: they come with episodes.' })]));
    const gists = document.getElementById('gists-list');
    gists.replaceChildren(...((state.gists || []).length
      ? state.gists.map((text) => el('li', { className: 'gist wrap', text }))
      : [el('li', { className: 'muted', text: 'No drift thoughts waiting.' })]));
    const learned = document.getElementById('learned-list');
    learned.replaceChildren(...((state.learned || []).length
      ? state.learned.map((line) => el('li', { className: 'learned', text: line }))
      : [el('li', { className: 'muted', text: 'Nothing learned yet.' })]));
  },
};
