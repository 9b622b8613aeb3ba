// One reader of GET /health for a page: polls it (every 8 s while the tab is visible; every
// second while a model's state is still "unknown", i.e. the start-up check has not settled)
// and hands each answer to every subscriber. The page is logged in and the fetch sends its
// cookie: /health tells the details (models, store, jobs) to the person only, and to anyone
// else just `status` and `version`. /health answers 503 while the store cannot take writes,
// with the same JSON body: it is read all the same. A failed fetch is skipped silently
// (the page's own connection badge or section errors say the server is gone).

const POLL_MS = 8000;
const SETTLING_MS = 1000;

/** Whether any job's model is still "unknown" (nothing has tried it yet). */
export function settling(health) {
  const llm = (health && health.llm) || {};
  return Object.values(llm).some((job) => job && job.state === 'unknown');
}

export function createHealthWatch() {
  const listeners = [];
  let last = null;
  let timer = 0;
  let inFlight = null;

  async function read() {
    try {
      const response = await fetch('/health', { cache: 'no-store', credentials: 'same-origin',
        headers: { Accept: 'application/json' } });
      return await response.json();
    } catch {
      return null;
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, last && settling(last) ? SETTLING_MS : POLL_MS);
  }

  /** Read /health now (one read at a time) and tell the subscribers; resolves to the answer. */
  function refresh() {
    if (document.visibilityState === 'hidden') { schedule(); return Promise.resolve(last); }
    if (!inFlight) {
      inFlight = read().then((health) => {
        if (health) {
          last = health;
          for (const listener of listeners) listener(health);
        }
        return last;
      }).finally(() => { inFlight = null; schedule(); });
    }
    return inFlight;
  }

  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') refresh();
  });

  return {
    refresh,
    /** Call `listener(health)` with each answer (and now, with the last one, if any). */
    subscribe(listener) {
      listeners.push(listener);
      if (last) listener(last);
    },
    last: () => last,
  };
}
