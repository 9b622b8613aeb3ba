// The dashboard's "Notifications on this device" (in Settings, #settings-push): the switch
// "Notify me on this device" asks the browser's permission, subscribes this browser to Web
// Push with the server's VAPID key (GET /api/push/key) and gives the subscription to the
// server (POST /api/push/subscriptions); off, it removes it there (DELETE) and unsubscribes.
// "Send a test" has the server push to this device (POST /api/push/subscriptions/<id>/test)
// and says what the push service answered. (Every device the server pushes to, with how its
// pushes went, is listed in "Notifications away from the page", brain-delivery.js.) Loaded on
// its own (brain.html loads this module), again on the Settings section's Refresh and when the
// tab comes back into view.

import { announce } from './brain-ui.js';
import { callApi } from './brain-api.js';
import { registerWorker } from './app-shell.js';

const $ = (id) => document.getElementById(id);
const root = $('settings-push');
const toggle = $('push-enabled');
const testButton = $('push-test');
const stateLine = $('push-state');
const resultLine = $('push-result');
const errorLine = $('push-error');

const TEST_WORDS = {
  sent: 'Sent: the notification should show on this device in a moment.',
  gone: 'The push service no longer knows this device: turn "Notify me on this device" off and on again.',
  failed: 'Not sent',
};

let mine = null; // this browser's device among GET /api/push/subscriptions' items, if listed
let busy = false;

// --- what this browser can do -----------------------------------------------------------------

function isAppleMobile() {
  const ua = navigator.userAgent;
  return /iPhone|iPad|iPod/.test(ua) || (/Macintosh/.test(ua) && navigator.maxTouchPoints > 1);
}

function isInstalled() {
  return window.matchMedia('(display-mode: standalone)').matches || navigator.standalone === true;
}

/** Why this browser cannot get Web Push here, in words; '' when it can. */
function unsupported() {
  if (!window.isSecureContext) {
    return 'This page is not a secure context (it needs https://, or localhost), so the browser '
      + 'offers no notifications to it.';
  }
  if (!('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window)) {
    return isAppleMobile() && !isInstalled()
      ? 'Add Chalie to the home screen first (see below), then turn this on in the app.'
      : 'This browser cannot get push notifications.';
  }
  return '';
}

/** A readable name for this device, from the user agent: "Chrome on Android". */
export function deviceName() {
  const ua = navigator.userAgent;
  let browser = 'A browser';
  if (/Edg\//.test(ua)) browser = 'Edge';
  else if (/OPR\//.test(ua)) browser = 'Opera';
  else if (/Firefox\/|FxiOS\//.test(ua)) browser = 'Firefox';
  else if (/Chrome\/|Chromium\/|CriOS\//.test(ua)) browser = 'Chrome';
  else if (/Safari\//.test(ua)) browser = 'Safari';
  let system = '';
  if (/iPhone|iPod/.test(ua)) system = 'iPhone';
  else if (/iPad/.test(ua) || (/Macintosh/.test(ua) && navigator.maxTouchPoints > 1)) system = 'iPad';
  else if (/Android/.test(ua)) system = 'Android';
  else if (/CrOS/.test(ua)) system = 'ChromeOS';
  else if (/Windows/.test(ua)) system = 'Windows';
  else if (/Mac OS X|Macintosh/.test(ua)) system = 'macOS';
  else if (/Linux/.test(ua)) system = 'Linux';
  return system ? `${browser} on ${system}` : browser;
}

function keyBytes(base64url) {
  const base64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
  const raw = atob(base64 + '==='.slice((base64.length + 3) % 4));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

function sameBytes(buffer, bytes) {
  if (!buffer) return false;
  const a = new Uint8Array(buffer);
  return a.length === bytes.length && a.every((b, i) => b === bytes[i]);
}

async function registration() {
  if (!(await registerWorker())) throw new Error("Chalie's service worker could not start in this browser.");
  return navigator.serviceWorker.ready;
}

async function currentSubscription() {
  return (await registration()).pushManager.getSubscription();
}

// --- the switch and its words -------------------------------------------------------------------

function showState(subscription) {
  const reason = unsupported();
  const blocked = !reason && Notification.permission === 'denied';
  if (!busy) toggle.checked = Boolean(mine);
  toggle.disabled = busy || Boolean(reason) || (blocked && !mine);
  testButton.disabled = busy || !mine || blocked;
  if (busy) return; // the words stay until the change is done
  root.dataset.state = reason ? 'unsupported' : blocked ? 'blocked' : mine ? 'on' : 'off';
  if (reason) stateLine.textContent = reason;
  else if (blocked) {
    stateLine.textContent = 'Notifications are blocked for Chalie in this browser: allow them in '
      + "the site's settings (beside the address bar), then reload this page."
      + (mine ? ' Until then the server pushes to this device, and it shows nothing.' : '');
  } else if (mine) stateLine.textContent = `On: this device (${mine.name || deviceName()}) gets Chalie's notifications.`;
  else if (subscription) stateLine.textContent = 'Off: the server no longer lists this device.';
  else stateLine.textContent = 'Off.';
}

async function load(fresh = true) {
  if (fresh) errorLine.textContent = '';
  root.setAttribute('aria-busy', 'true');
  try {
    let subscription = null;
    if (!unsupported()) subscription = await currentSubscription();
    const devices = (await callApi('/api/push/subscriptions')).items || [];
    mine = subscription ? devices.find((item) => item.endpoint === subscription.endpoint) || null : null;
    showState(subscription);
  } catch (error) {
    errorLine.textContent = error.message || 'Something went wrong.';
    showState(null);
  } finally {
    root.removeAttribute('aria-busy');
  }
}

async function turnOn() {
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') {
    throw new Error(permission === 'denied'
      ? 'Notifications are blocked for Chalie in this browser.'
      : 'Notifications were not allowed: the browser asked and got no yes.');
  }
  const { public_key: publicKey } = await callApi('/api/push/key');
  const key = keyBytes(publicKey);
  const pushManager = (await registration()).pushManager;
  let subscription = await pushManager.getSubscription();
  if (subscription && !sameBytes(subscription.options?.applicationServerKey, key)) {
    await subscription.unsubscribe(); // made with another server key: useless now
    subscription = null;
  }
  if (!subscription) {
    subscription = await pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  }
  const { endpoint, keys } = subscription.toJSON();
  await callApi('/api/push/subscriptions', { method: 'POST', body: {
    endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth }, name: deviceName() } });
  announce('Notifications are on for this device.');
}

async function turnOff() {
  const subscription = await currentSubscription();
  if (mine) await callApi(`/api/push/subscriptions/${encodeURIComponent(mine.id)}`, { method: 'DELETE' });
  if (subscription) await subscription.unsubscribe();
  announce('Notifications are off for this device.');
}

async function act(action) {
  if (busy) return;
  busy = true;
  errorLine.textContent = '';
  resultLine.textContent = '';
  showState(null);
  try {
    await action();
  } catch (error) {
    errorLine.textContent = error.message || 'Something went wrong.';
  } finally {
    busy = false;
    await load(false);
    // The dashboard's list of devices (brain-delivery.js) shows the change too.
    document.querySelector('#delivery button.refresh')?.click();
  }
}

async function sendTest() {
  if (!mine) return;
  const id = mine.id;
  await act(async () => {
    const answer = await callApi(`/api/push/subscriptions/${encodeURIComponent(id)}/test`, { method: 'POST' });
    const words = TEST_WORDS[answer.result] || `The push service answered: ${answer.result}`;
    if (answer.result === 'sent') resultLine.textContent = words;
    else errorLine.textContent = answer.error ? `${words}: ${answer.error}` : words;
  });
}

function start() {
  if (!root) return;
  toggle.addEventListener('change', () => act(toggle.checked ? turnOn : turnOff));
  testButton.addEventListener('click', sendTest);
  document.querySelector('#settings button.refresh')?.addEventListener('click', () => {
    if (!busy) load();
  });
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && !busy) load();
  });
  registerWorker();
  load();
}

start();
