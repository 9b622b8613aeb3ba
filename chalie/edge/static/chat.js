// The chat page (/): wires the connection (socket.js), the conversation (chat-render.js), the
// composer (chat-composer.js), and what /health says (the banner; the setup card while no
// model answers). Sends a chat, or steers the running turn, from the same
// input; keeps the connection badge, the Send/Steer mode, the live region and the scroll.
// An address ending in #seq-<n> (a notification's link) shows that message, marked.

import { createConnection, newClientId } from "./socket.js";
import { createRenderer } from "./chat-render.js";
import { createComposer } from "./chat-composer.js";
import { createHealthWatch } from "./health-watch.js";
import { startBanner } from "./health-banner.js";
import { startSetupCard } from "./setup-card.js";
import { onOpenRequest, registerWorker } from "./app-shell.js";

const MAX_FRAME_BYTES = 60000; // under the server's 64 KiB frame limit, with room for the JSON
const NEAR_BOTTOM_PX = 80;
const HISTORY_QUIET_MS = 250; // the first replay ends at the first pause this long ...
const HISTORY_MAX_MS = 2000; // ... or this long after the socket opened
const ANNOUNCEMENTS_KEPT = 3;
const JUST_LOGGED_IN = "chalie.just-logged-in";

const $ = (id) => document.getElementById(id);
const log = $("messages");
const announcer = $("announcer");
const input = $("input");
const send = $("send");
const stop = $("stop");
const modeHint = $("mode-hint");
const sendError = $("send-error");
const connectionBadge = $("connection");
const jump = $("jump");
const composerForm = $("composer");

const CONNECTION_WORDS = { open: "Connected", connecting: "Reconnecting…", closed: "Offline" };

// -- the live region: final answers, notifications, escalations (never each delta) --

function announce(text) {
  const line = document.createElement("p");
  line.textContent = text;
  announcer.append(line);
  while (announcer.childElementCount > ANNOUNCEMENTS_KEPT) announcer.firstElementChild.remove();
}

// -- scrolling: follow the newest content unless the person scrolled up --

let followNewest = true;

function isNearBottom() {
  return log.scrollHeight - log.scrollTop - log.clientHeight < NEAR_BOTTOM_PX;
}

function scrollToNewest() {
  log.scrollTop = log.scrollHeight;
  jump.hidden = true;
}

let knownHeight = 0;

function keepNewestInView() {
  if (followNewest) scrollToNewest();
  else if (log.scrollHeight > knownHeight) jump.hidden = false; // something new below
  knownHeight = log.scrollHeight;
}

log.addEventListener("scroll", () => {
  followNewest = isNearBottom();
  if (followNewest) jump.hidden = true;
}, { passive: true });
new MutationObserver(keepNewestInView).observe(log, { childList: true, subtree: true, characterData: true });
log.addEventListener("load", () => { if (followNewest) scrollToNewest(); }, true); // images
window.addEventListener("resize", () => { if (followNewest) scrollToNewest(); });
jump.addEventListener("click", () => {
  followNewest = true;
  scrollToNewest();
  input.focus();
});

// -- the message the address names (#seq-<n>, a notification's link): scrolled to and marked
// once it is there (after the history replay that brings it, so that the replay's newer
// messages do not scroll it away) --

let wantedSeq = null;

function revealWanted() {
  if (!wantedSeq) return;
  const node = log.querySelector(`[data-seq="${wantedSeq}"]`);
  if (!node) return;
  wantedSeq = null;
  for (const old of log.querySelectorAll(".highlight")) old.classList.remove("highlight");
  node.classList.add("highlight");
  followNewest = false;
  if (!node.hasAttribute("tabindex")) node.tabIndex = -1;
  node.scrollIntoView({ block: "center" });
  node.focus({ preventScroll: true });
  jump.hidden = isNearBottom();
}

function wantHash() {
  const match = /^#seq-(\d+)$/.exec(location.hash);
  wantedSeq = match ? match[1] : null;
  revealWanted();
}

window.addEventListener("hashchange", wantHash);
// A notification clicked while this tab is open: the worker asks it to show the message.
onOpenRequest((url) => {
  const target = new URL(url, location.href);
  if (target.pathname !== location.pathname) { location.assign(target.href); return; }
  history.replaceState(null, "", target.hash || location.pathname);
  wantHash();
});

// -- the running turn: Send or Steer --

// Steering needs the socket: while it is down, what the person sends is a chat, queued.
function steering() {
  return Boolean(renderer.runningExchangeId()) && connection.isOpen();
}

function showMode() {
  const steers = steering();
  send.textContent = steers ? "Steer" : "Send";
  modeHint.textContent = steers ? "A turn is running: what you send steers it." : "";
  stop.hidden = !steers;
  composerForm.dataset.mode = steers ? "steer" : "send"; // a phone gives Stop and Steer a row
}

// -- history replay: frames of the first resume after the page loads are not announced. The
// replay is one burst; it is over at its first pause, once a live-only delta arrives, once the
// person sends something, or when that first socket closes. --

let replaying = false;
let replayStartedAt = 0;
let replayTimer = 0;
let openedOnce = false;

function startReplay() {
  replaying = true;
  replayStartedAt = Date.now();
  noteReplayFrame();
}

function endReplay() {
  clearTimeout(replayTimer);
  replaying = false;
  revealWanted();
}

function noteReplayFrame() {
  clearTimeout(replayTimer);
  if (Date.now() - replayStartedAt > HISTORY_MAX_MS) { endReplay(); return; }
  replayTimer = setTimeout(endReplay, HISTORY_QUIET_MS);
}

// -- wiring --

const renderer = createRenderer({
  log,
  announce,
  onRunningChange: showMode,
  sendAction(frame) {
    endReplay();
    return connection.send(frame);
  },
});

// /health: the banner of what is wrong, and the setup card while no model answers.
const health = createHealthWatch();
startBanner(health);
startSetupCard(health, { composer: composerForm, input, log });

function showConnection(state) {
  if (state === "open" && connectionBadge.dataset.state !== "open") health.refresh();
  connectionBadge.dataset.state = state;
  connectionBadge.textContent = CONNECTION_WORDS[state] || state;
  if (state === "open" && !openedOnce) { openedOnce = true; startReplay(); }
  if (state !== "open") endReplay();
  showMode();
}

const connection = createConnection({
  onFrame(frame) {
    if (replaying) noteReplayFrame();
    renderer.renderFrame(frame, !replaying);
    if (!replaying) revealWanted();
  },
  onDelta(frame) {
    endReplay();
    renderer.applyDelta(frame);
  },
  onState: showConnection,
  onPendingChange: (pending) => renderer.syncEchoes(pending, (id) => connection.wasSent(id)),
});

const composer = createComposer({
  form: composerForm,
  input,
  attach: $("attach"),
  attachments: $("attachments"),
  attachError: $("attach-error"),
  onSubmit: submitMessage,
});

function frameTooBig(text) {
  return new TextEncoder().encode(text).length > MAX_FRAME_BYTES;
}

function steer(text) {
  if (!connection.send({ type: "act_steer", text })) {
    sendError.textContent = "Not connected: your steering was not sent. Try again once connected.";
    return false;
  }
  return true;
}

let sending = false;

async function submitMessage() {
  sendError.textContent = "";
  endReplay();
  const text = input.value;
  if (!text.trim() || sending) return;
  if (frameTooBig(text)) {
    sendError.textContent = "This message is too long to send; split it into parts.";
    return;
  }
  if (steering()) {
    if (steer(text)) {
      renderer.showSteer(`You steered: ${text}`);
      composer.clearText();
    }
    return;
  }
  sending = true;
  send.disabled = true;
  input.readOnly = true;
  try {
    const images = await composer.takeImages(); // waits for uploads still under way
    const chat = { client_id: newClientId(), text };
    if (images.ids.length) chat.image_ids = images.ids;
    composer.clearText();
    images.release();
    followNewest = true;
    renderer.showEcho(chat, false);
    connection.sendChat(chat);
  } finally {
    sending = false;
    send.disabled = false;
    input.readOnly = false;
    input.focus();
  }
}

stop.addEventListener("click", () => {
  sendError.textContent = "";
  endReplay();
  if (steering() && steer("stop")) renderer.showSteer("You asked Chalie to stop.");
});

showConnection("connecting");
for (const chat of connection.pending()) renderer.showEcho(chat, false);
wantHash();
connection.start();
health.refresh();
registerWorker();
// Just logged in (login.js leaves a mark for this tab): the message box has the focus.
try {
  if (sessionStorage.getItem(JUST_LOGGED_IN)) {
    sessionStorage.removeItem(JUST_LOGGED_IN);
    input.focus();
  }
} catch { /* no storage: no focus */ }
