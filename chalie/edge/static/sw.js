// Chalie's service worker, at /sw.js so that its scope is every page (/). It does three things:
//
// - Keeps the app shell (the chat page, the dashboard and the files they load) for an offline
//   start: the pages and their files come from the network first, and each good answer
//   refreshes the copy kept; with no network the kept copy answers. Nothing else is touched:
//   the API, /ws, /auth/, /v1/, /mcp, /health, /metrics, /cards/, images... pass through to
//   the network, and no answer of theirs is ever kept.
// - Shows a Web Push message (the server's payload: kind, title, body, url, tag, channel, seq,
//   approval_id and actions for an escalation that waits; test: true for "Send a test") as a
//   notification, with Approve and Deny on an escalation.
// - On a click: Approve or Deny answers the escalation (POST /api/approvals/<id>); anything
//   else opens the chat at that message (/#seq-<seq>), in the open chat tab when there is one.
//
// A classic script (module service workers are not everywhere yet), no build step.

"use strict";

const SHELL_CACHE = "chalie-shell-v1";
// The pages and every file they load (tests/edge/test_pages.py checks this list against them).
const PAGES = ["/", "/brain"];
const FILES = [
  "base.css", "chat.css", "brain.css", "settings.css",
  "icon.svg", "icon-192.png", "icon-512.png", "icon-maskable-512.png",
  "app-shell.js",
  "chat.js", "socket.js", "chat-render.js", "chat-composer.js", "chat-escalation.js",
  "chat-card.js", "markdown.js", "health-watch.js", "health-banner.js", "setup-card.js",
  "model-form.js", "model-fields.js", "settings-meta.js", "settings-fields.js", "logout.js",
  "brain.js", "brain-ui.js", "brain-api.js", "brain-links.js", "brain-tokens.js",
  "brain-consent.js", "brain-memory.js", "brain-plans.js", "brain-activity.js",
  "brain-spending.js", "brain-state.js", "brain-notices.js", "brain-settings.js",
  "brain-names.js", "brain-delivery.js", "brain-telegram.js", "push-settings.js",
].map((name) => `/static/${name}`);
const SHELL = new Set([...PAGES, ...FILES, "/manifest.webmanifest"]);
const ICON = "/static/icon-192.png";
const ACTION_TITLES = { approve: "Approve", deny: "Deny" };

// --- the shell ------------------------------------------------------------------------------

// Whether an answer may be kept: a good one, for this very address (a page answered with the
// login page after a redirect is not the page).
function keepable(response) {
  return response.ok && !response.redirected && response.type === "basic";
}

// Each file on its own: one that cannot be fetched now (the network, a lapsed login) is
// fetched again the next time a page asks for it; the worker installs anyway, since it also
// carries the notifications.
async function precache() {
  const cache = await caches.open(SHELL_CACHE);
  await Promise.all([...SHELL].map(async (path) => {
    try {
      const response = await fetch(path, { credentials: "same-origin", cache: "no-cache" });
      if (keepable(response)) await cache.put(path, response);
    } catch { /* offline now: kept on the next visit */ }
  }));
}

self.addEventListener("install", (event) => {
  event.waitUntil(precache().then(() => self.skipWaiting()));
});

// An older version's caches, and files this version's pages no longer load, are dropped.
self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name !== SHELL_CACHE) await caches.delete(name);
    }
    const cache = await caches.open(SHELL_CACHE);
    for (const request of await cache.keys()) {
      if (!SHELL.has(new URL(request.url).pathname)) await cache.delete(request);
    }
    await self.clients.claim();
  })());
});

// The network's answer as soon as it comes (kept on the side), else the kept copy.
async function networkFirst(event, path) {
  const cache = await caches.open(SHELL_CACHE);
  try {
    const response = await fetch(event.request);
    if (keepable(response)) event.waitUntil(cache.put(path, response.clone()));
    return response;
  } catch (error) {
    const kept = await cache.match(path) || (PAGES.includes(path) && await cache.match("/"));
    if (kept) return kept;
    throw error;
  }
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin || !SHELL.has(url.pathname)) return; // untouched
  const page = PAGES.includes(url.pathname);
  if (page && request.mode !== "navigate") return;
  // A page's address may carry a query; its kept copy is the page's own.
  if (!page && url.search) return;
  event.respondWith(networkFirst(event, url.pathname));
});

// --- notifications --------------------------------------------------------------------------

function payloadOf(data) {
  if (!data) return {};
  try {
    const value = data.json();
    return value && typeof value === "object" ? value : { body: String(value) };
  } catch {
    return { body: data.text() };
  }
}

/** The notification a push payload becomes: [title, options]. */
function notificationOf(payload) {
  if (payload.test) {
    return [payload.title || "Chalie: a test", {
      body: payload.body || "Notifications from Chalie reach this device.",
      tag: payload.tag || "chalie-test", icon: ICON, data: { ...payload, url: payload.url || "/" },
    }];
  }
  const options = { body: payload.body || "", icon: ICON, data: payload };
  if (payload.tag) {
    options.tag = String(payload.tag);
    options.renotify = true;
  }
  if (payload.approval_id && Array.isArray(payload.actions)) {
    const named = payload.actions.filter((a) => a in ACTION_TITLES);
    options.actions = (named.length ? named : Object.keys(ACTION_TITLES))
      .map((action) => ({ action, title: ACTION_TITLES[action] }));
    options.requireInteraction = true; // it waits for an answer
  }
  return [payload.title || "Chalie", options];
}

self.addEventListener("push", (event) => {
  const [title, options] = notificationOf(payloadOf(event.data));
  event.waitUntil(self.registration.showNotification(title, options));
});

/** The address a payload's url names, on this server only. */
function chatAddress(url) {
  const target = new URL(url || "/", self.location.origin);
  return target.origin === self.location.origin ? target : new URL("/", self.location.origin);
}

// The chat tab when one is open (it is told to show the message, without a reload), else a
// tab of Chalie's this worker controls (sent there), else a new window.
async function openChat(url) {
  const target = chatAddress(url);
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const mine = windows.filter((c) => new URL(c.url).origin === target.origin);
  const chat = mine.find((c) => new URL(c.url).pathname === target.pathname);
  if (chat) {
    chat.postMessage({ type: "chalie.open", url: target.href });
    try { await chat.focus(); } catch { /* focusing needs the click itself */ }
    return "shown";
  }
  const other = mine.find((c) => c.frameType === "top-level" && typeof c.navigate === "function");
  if (other) {
    try {
      const navigated = await other.navigate(target.href);
      if (navigated) {
        try { await navigated.focus(); } catch { /* as above */ }
        return "navigated";
      }
    } catch { /* not controlled by this worker: a new window below */ }
  }
  try {
    await self.clients.openWindow(target.href);
    return "opened";
  } catch {
    return "not allowed"; // a window opens only from the click itself
  }
}

async function answerApproval(payload, approve) {
  const response = await fetch(`/api/approvals/${encodeURIComponent(payload.approval_id)}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ approve }),
  });
  return response.status;
}

/**
 * What a click on a notification does; `action` is "approve", "deny" or "" (the body).
 * Resolves to what happened: {action, status} after an answer; {opened} after showing the
 * chat: "shown" (the open chat tab was asked to), "navigated", "opened" (a new window). An answer the server refused (the login lapsed, the question expired) opens the chat
 * at the question instead. The `notificationclick` listener calls it; so can a test, inside
 * the worker (a synthetic NotificationEvent cannot extend its life with waitUntil).
 */
self.chalieNotificationClick = async function chalieNotificationClick(notification, action) {
  const payload = notification.data || {};
  notification.close();
  if ((action === "approve" || action === "deny") && payload.approval_id) {
    let status = 0;
    try { status = await answerApproval(payload, action === "approve"); } catch { /* offline */ }
    if (status >= 200 && status < 300) return { action, status };
    return { action, status, opened: await openChat(payload.url) };
  }
  return { opened: await openChat(payload.url) };
};

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(self.chalieNotificationClick(event.notification, event.action || ""));
});

// The push service replaced the subscription (it expired or was renewed): tell the server the
// new one under the old one's name, and forget the old one.
async function renewSubscription(event) {
  const old = event.oldSubscription;
  const fresh = event.newSubscription
    || (old && await self.registration.pushManager.subscribe(old.options));
  if (!fresh) return;
  const call = (path, init = {}) => fetch(path, { credentials: "same-origin", ...init });
  let known = null;
  if (old) {
    const listed = await call("/api/push/subscriptions");
    const items = listed.ok ? (await listed.json()).items || [] : [];
    known = items.find((item) => item.endpoint === old.endpoint) || null;
  }
  const body = { ...fresh.toJSON(), name: known ? known.name : undefined };
  delete body.expirationTime;
  const made = await call("/api/push/subscriptions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  if (made.ok && known) {
    await call(`/api/push/subscriptions/${encodeURIComponent(known.id)}`, { method: "DELETE" });
  }
}

self.addEventListener("pushsubscriptionchange", (event) => {
  event.waitUntil(renewSubscription(event).catch(() => undefined));
});
