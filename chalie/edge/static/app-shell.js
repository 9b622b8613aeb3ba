// The installable app's side in the pages: registers the service worker (/sw.js, scope /: it
// keeps the pages for an offline start and shows push notifications), and hands the page what
// the worker asks of an open tab (a notification was clicked: show that message).

let registering = null;

/** Register the service worker once; its registration, or null where there is none. */
export function registerWorker() {
  if (!registering) {
    registering = "serviceWorker" in navigator
      ? navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch((error) => {
        console.warn("Chalie's service worker could not be registered:", error);
        return null;
      })
      : Promise.resolve(null);
  }
  return registering;
}

/** Call `handler(url)` when the worker asks this tab to open `url` (a notification's). */
export function onOpenRequest(handler) {
  if (!("serviceWorker" in navigator)) return;
  navigator.serviceWorker.addEventListener("message", (event) => {
    const message = event.data;
    if (message && message.type === "chalie.open" && typeof message.url === "string") {
      handler(message.url);
    }
  });
}
