// The chat page's connection to /ws: login check, resume from the last seq, pending chats that
// survive reloads and reconnects, backoff with jitter, keepalive, and whether the page is
// visible (a `presence` frame after each resume and on every visibility change). It renders nothing; it hands
// each new frame to the page exactly once.
//
// Reliability contract: every frame with a seq at or below the last one seen is dropped (a
// resume replays from lastSeq, and the server may push a frame again); a chat stays pending
// (in sessionStorage) until a `processing` status carrying its client_id arrives, and each
// pending chat is sent again, unchanged, whenever a socket opens.

const PENDING_KEY = "chalie.pending";
const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 8000;
const OPEN_TIMEOUT_MS = 10000;
const RESEND_AFTER_MS = 2000;

export function loginUrl() {
  return "/login?next=" + encodeURIComponent(location.pathname).replace(/%2F/g, "/");
}

export function newClientId() {
  if (crypto.randomUUID) return crypto.randomUUID(); // only in secure contexts
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function loadPending() {
  try {
    const list = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "[]");
    return Array.isArray(list) ? list.filter((c) => c && typeof c.client_id === "string") : [];
  } catch {
    return [];
  }
}

// True while the person is logged in; false (after sending the browser to the login page) if
// not; throws when the server cannot be reached.
async function sessionIsValid() {
  const response = await fetch("/auth/session", { cache: "no-store", credentials: "same-origin" });
  if (response.status === 401) {
    location.assign(loginUrl());
    return false;
  }
  if (!response.ok) throw new Error(`session check: HTTP ${response.status}`);
  return true;
}

/**
 * handlers: onFrame(frame) for every new frame (seq'd ones once each, unseq'd ones as they
 * come); onDelta(frame) for message_delta; onState("open"|"connecting"|"closed");
 * onPendingChange(pendingList) when a chat is queued, sent or acknowledged.
 */
export function createConnection(handlers) {
  let socket = null;
  let lastSeq = 0;
  let attempt = 0;
  let retryTimer = 0;
  let openTimer = 0;
  let watchdog = 0;
  let resendTimer = 0;
  let lastPingAt = 0;
  let pingGapMs = 0;
  let stopped = false;
  const pending = loadPending();
  const sentOnSocket = new WeakMap(); // socket -> Set of client_ids sent on it

  function setState(state) { handlers.onState?.(state); }

  function savePending() {
    try { sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending)); } catch { /* storage full or off */ }
    handlers.onPendingChange?.(pending.slice());
  }

  function isOpen() { return socket !== null && socket.readyState === WebSocket.OPEN; }

  function sendRaw(frame) {
    if (!isOpen()) return false;
    socket.send(JSON.stringify(frame));
    return true;
  }

  // Whether the person can see this page: while one of their pages is visible, the server
  // sends nothing to their devices (notify.skip_when_visible).
  function sendPresence() {
    sendRaw({ type: "presence", visible: document.visibilityState === "visible" });
  }

  function sendPendingChat(chat) {
    const frame = { type: "chat", text: chat.text, client_id: chat.client_id };
    if (chat.image_ids && chat.image_ids.length) frame.image_ids = chat.image_ids;
    if (sendRaw(frame)) sentOnSocket.get(socket)?.add(chat.client_id);
  }

  function acknowledge(clientId) {
    const index = pending.findIndex((c) => c.client_id === clientId);
    if (index >= 0) { pending.splice(index, 1); savePending(); }
  }

  function armWatchdog() {
    clearTimeout(watchdog);
    if (!pingGapMs) return;
    // Three keepalives in a row missed: the network is gone without the socket noticing.
    watchdog = setTimeout(() => socket?.close(4000, "keepalive lost"), Math.max(5000, pingGapMs * 3));
  }

  function onMessage(event) {
    let frame;
    try { frame = JSON.parse(event.data); } catch { return; }
    if (!frame || typeof frame !== "object") return;
    armWatchdog();
    if (frame.type === "ping") {
      const now = Date.now();
      if (lastPingAt) pingGapMs = now - lastPingAt;
      lastPingAt = now;
      sendRaw({ type: "pong" });
      armWatchdog();
      return;
    }
    if (frame.type === "message_delta") { handlers.onDelta?.(frame); return; }
    if (typeof frame.seq === "number" && frame.seq > 0) {
      if (frame.seq <= lastSeq) return; // shown already
      lastSeq = frame.seq;
    }
    if (frame.type === "status" && frame.stage === "processing" && frame.client_id) {
      acknowledge(frame.client_id);
    }
    if (frame.type === "error" && frame.seq === undefined && pending.length) {
      // The server could not take a frame (it is restarting): send the pending chats again
      // shortly; a repeated client_id never starts a second turn.
      clearTimeout(resendTimer);
      resendTimer = setTimeout(() => { for (const chat of pending.slice()) sendPendingChat(chat); }, RESEND_AFTER_MS);
    }
    handlers.onFrame?.(frame);
  }

  function scheduleReconnect() {
    clearTimeout(retryTimer);
    if (stopped) return;
    if (!navigator.onLine) { setState("closed"); return; } // the `online` event reconnects
    setState("connecting");
    const base = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** attempt);
    attempt += 1;
    retryTimer = setTimeout(connect, base * (0.8 + Math.random() * 0.4));
  }

  async function connect() {
    clearTimeout(retryTimer);
    if (stopped || (socket && socket.readyState <= WebSocket.OPEN)) return;
    setState(navigator.onLine ? "connecting" : "closed");
    try {
      if (!(await sessionIsValid())) { stopped = true; return; }
    } catch {
      scheduleReconnect();
      return;
    }
    if (socket && socket.readyState <= WebSocket.OPEN) return; // another attempt won the race
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}/ws?channel=main`);
    socket = ws;
    sentOnSocket.set(ws, new Set());
    openTimer = setTimeout(() => { if (ws.readyState === WebSocket.CONNECTING) ws.close(); }, OPEN_TIMEOUT_MS);
    ws.addEventListener("open", () => {
      clearTimeout(openTimer);
      if (ws !== socket) return;
      attempt = 0;
      lastPingAt = 0;
      pingGapMs = 0;
      ws.send(JSON.stringify({ type: "resume", last_seq: lastSeq }));
      sendPresence();
      for (const chat of pending.slice()) sendPendingChat(chat);
      setState("open");
      handlers.onPendingChange?.(pending.slice());
    });
    ws.addEventListener("message", (event) => { if (ws === socket) onMessage(event); });
    ws.addEventListener("close", () => {
      clearTimeout(openTimer);
      if (ws !== socket) return;
      clearTimeout(watchdog);
      socket = null;
      scheduleReconnect();
    });
  }

  function reconnectNow() {
    attempt = 0;
    if (socket && socket.readyState <= WebSocket.OPEN) return;
    connect();
  }

  window.addEventListener("online", reconnectNow);
  window.addEventListener("offline", () => {
    setState("closed");
    socket?.close(4001, "offline"); // a fresh socket once the network is back
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && !socket) reconnectNow();
    else sendPresence();
  });

  return {
    start: connect,
    isOpen,
    /** Send a frame now; false when the socket is not open (nothing is queued). */
    send: sendRaw,
    /** Queue a chat until the server acknowledges it; sent now when the socket is open. */
    sendChat(chat) {
      pending.push(chat);
      savePending();
      sendPendingChat(chat);
      handlers.onPendingChange?.(pending.slice());
      return isOpen();
    },
    pending: () => pending.slice(),
    /** Whether this chat went out on the socket that is open now. */
    wasSent: (clientId) => isOpen() && Boolean(sentOnSocket.get(socket)?.has(clientId)),
  };
}
