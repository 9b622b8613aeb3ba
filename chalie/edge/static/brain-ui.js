// Small DOM and formatting helpers for the brain dashboard. Everything is built with
// createElement and textContent (never HTML strings), so no value from the server is
// ever read as markup; nothing sets a style attribute (the page's CSP forbids it).

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An element: `el('li', {className: 'fact', dataset: {id: 3}}, 'text', child, ...)`. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  applyProps(node, props);
  appendAll(node, children);
  return node;
}

/** An SVG element with attributes (presentation attributes are fine under the CSP). */
export function svgEl(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
  appendAll(node, children);
  return node;
}

function applyProps(node, props) {
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'className') node.className = value;
    else if (name === 'text') node.textContent = String(value);
    else if (name === 'dataset') {
      for (const [key, v] of Object.entries(value)) node.dataset[key] = String(v);
    } else if (name === 'on') {
      for (const [type, handler] of Object.entries(value)) node.addEventListener(type, handler);
    } else if (name in node && !name.includes('-')) node[name] = value;
    else node.setAttribute(name, value === true ? '' : String(value));
  }
}

function appendAll(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

/** "label: value" as a small inline pair, the label muted. */
export function field(label, value, className = '') {
  return el('span', { className: `field ${className}`.trim() },
    el('span', { className: 'field-label', text: `${label}: ` }),
    el('span', { className: 'field-value', text: value ?? '—' }));
}

/** A badge saying online or offline (or any pair of words). */
export function onlineBadge(online, yes = 'online', no = 'offline') {
  return el('span', { className: `badge ${online ? 'online' : 'offline'}`, text: online ? yes : no });
}

// --- lists that keep their state across reloads ---------------------------------------------

const shownData = new WeakMap();
const emptyNotes = new WeakMap();

/** Fill `list` with one built item per entry (or the empty note), keeping open <details> and
 *  keyboard focus on the items that are still there. Unchanged data leaves the DOM alone. */
export function renderList(list, items, buildItem, emptyText) {
  const signature = JSON.stringify(items);
  if (shownData.get(list) === signature) return;
  // Never rebuild under an open confirmation: its opener would vanish. The next load will do.
  if (document.getElementById('confirm')?.open) return;
  shownData.set(list, signature);
  const kept = captureListState(list);
  list.replaceChildren(...items.map(buildItem));
  list.hidden = items.length === 0;
  emptyNote(list).hidden = items.length !== 0;
  emptyNote(list).textContent = emptyText;
  restoreListState(list, kept);
}

/** Forget what a list showed, so its next render rebuilds it (after a change by the page). */
export function forgetShown(list) {
  shownData.delete(list);
}

function emptyNote(list) {
  let note = emptyNotes.get(list);
  if (!note) {
    note = el('p', { className: 'empty muted', hidden: true });
    list.after(note);
    emptyNotes.set(list, note);
  }
  return note;
}

function itemKey(node) {
  const item = node.closest('[data-id], [data-name]');
  return item ? `${item.dataset.id ?? ''}|${item.dataset.name ?? ''}` : null;
}

function focusables(item) {
  return [...item.querySelectorAll('button, summary, a[href], input, select, textarea')];
}

function captureListState(list) {
  const open = new Set();
  for (const details of list.querySelectorAll('details[open]')) {
    open.add(`${itemKey(details)}|${details.className}`);
  }
  let focus = null;
  const active = document.activeElement;
  if (active && list.contains(active)) {
    const item = active.closest('[data-id], [data-name]');
    if (item) focus = { key: itemKey(active), index: focusables(item).indexOf(active) };
  }
  return { open, focus };
}

function restoreListState(list, { open, focus }) {
  for (const details of list.querySelectorAll('details')) {
    if (open.has(`${itemKey(details)}|${details.className}`)) details.open = true;
  }
  if (!focus) return;
  for (const item of list.querySelectorAll('[data-id], [data-name]')) {
    if (itemKey(item) === focus.key) {
      const target = focusables(item)[focus.index] ?? focusables(item)[0];
      if (target) target.focus();
      return;
    }
  }
  // The item is gone (forgotten, cancelled): keep focus in the section, on its heading.
  const heading = list.closest('section')?.querySelector('h2');
  if (heading) heading.focus();
}

/** Load a <details>' contents the first time it opens (and again whenever it is rebuilt). */
export function loadWhenOpened(details, load) {
  let loaded = false;
  details.addEventListener('toggle', () => {
    if (details.open && !loaded) {
      loaded = true;
      load().catch(() => { loaded = false; });
    }
  });
}

// --- the confirmation dialog ------------------------------------------------------------------

/** Ask "are you sure?" in the page's one <dialog id="confirm">; resolves true for "Yes".
 *  Escape or "No" answers false; focus goes back to `opener` either way. */
export function askToConfirm(message, opener) {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = message;
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      if (opener && opener.isConnected) opener.focus();
      resolve(dialog.returnValue === 'yes');
    }, { once: true });
    dialog.showModal();
    document.getElementById('confirm-no').focus();
  });
}

/** Wire the dialog's buttons once: "Yes" closes it with "yes", "No" with "no". */
export function setupConfirmDialog() {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-yes').addEventListener('click', () => dialog.close('yes'));
  document.getElementById('confirm-no').addEventListener('click', () => dialog.close('no'));
}

/** Copy the text of `node` to the clipboard; where the browser refuses, select it instead,
 *  for Control+C. `what` names it in the announcement ("Token copied."). */
export async function copyText(node, what) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(node.textContent);
      announce(`${what} copied.`);
      return;
    } catch { /* fall through to selecting the text */ }
  }
  window.getSelection().selectAllChildren(node);
  announce(`${what} is selected: press Control+C (or Command+C) to copy it.`);
}

/** Say something to screen readers through the page's polite status region. */
export function announce(message) {
  const region = document.getElementById('brain-status');
  if (!region) return;
  region.textContent = '';
  setTimeout(() => { region.textContent = message; }, 50);
}

// --- numbers and times, in the browser's own locale and zone ----------------------------------

export function formatNumber(value) {
  return typeof value === 'number' ? value.toLocaleString() : '—';
}

export function formatDecimal(value, digits = 2) {
  return typeof value === 'number' ? value.toFixed(digits) : '—';
}

/** Epoch seconds as local date and time. */
export function formatEpoch(seconds) {
  if (typeof seconds !== 'number') return '—';
  return formatDate(new Date(seconds * 1000));
}

/** An ISO 8601 time (any offset) as local date and time. */
export function formatIso(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : formatDate(date);
}

function formatDate(date) {
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** Local "HH:MM", 24-hour. */
export function clockTime(date) {
  return `${pad2(date.getHours())}:${pad2(date.getMinutes())}`;
}

function pad2(n) {
  return String(n).padStart(2, '0');
}

/** A duration in words: "45 s", "12 min", "3 h", "2 days". */
export function durationInWords(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${Math.round(s / 3600)} h`;
  const days = Math.round(s / 86400);
  return days === 1 ? '1 day' : `${days} days`;
}

/** How long ago, in words: "just now", "5 min ago". */
export function ageInWords(seconds) {
  if (typeof seconds !== 'number') return '—';
  return seconds < 5 ? 'just now' : `${durationInWords(seconds)} ago`;
}

/** Seconds since epoch `seconds`, by this browser's clock. */
export function secondsSince(seconds) {
  return Date.now() / 1000 - seconds;
}

/** A datetime-local value ("2025-03-01T09:30") as ISO 8601 with this browser's UTC offset
 *  at that moment ("2025-03-01T09:30:00+01:00"); null for an empty or invalid value. */
export function isoWithLocalOffset(localValue) {
  if (!localValue) return null;
  const date = new Date(localValue);
  if (Number.isNaN(date.getTime())) return null;
  const withSeconds = localValue.length === 16 ? `${localValue}:00` : localValue;
  const offset = -date.getTimezoneOffset();
  const sign = offset >= 0 ? '+' : '-';
  const abs = Math.abs(offset);
  return `${withSeconds}${sign}${pad2(Math.floor(abs / 60))}:${pad2(abs % 60)}`;
}

/** `text` cut to about `max` characters, on a word boundary when one is near. */
export function shorten(text, max = 80) {
  const clean = String(text ?? '').replace(/\s+/g, ' ').trim();
  if (clean.length <= max) return clean;
  const cut = clean.slice(0, max);
  const space = cut.lastIndexOf(' ');
  return `${(space > max * 0.6 ? cut.slice(0, space) : cut).trimEnd()}…`;
}
