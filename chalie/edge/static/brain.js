// The brain dashboard (/brain): wires every section to its loader, its Refresh button and
// its error line, loads them all on open, and re-loads the live ones (those marked `poll`:
// goals, signals, interfaces, subscriptions, MCP servers, API tokens, calls waiting for the
// person's approval, always allowed tools...) every 15 seconds while the tab is visible.
// /health (the banner of what is wrong, and the notices of background jobs that wait after
// failing) has its own poll (health-watch.js).

import { setupConfirmDialog } from './brain-ui.js';
import { pairingSection, interfacesSection, mcpSection, subscriptionsSection } from './brain-links.js';
import { tokensSection } from './brain-tokens.js';
import { approvalsSection, allowancesSection } from './brain-consent.js';
import { memorySection } from './brain-memory.js';
import { goalsSection, schedulesSection } from './brain-plans.js';
import { signalsSection, turnsSection } from './brain-activity.js';
import { spendingSection, proactiveSection } from './brain-spending.js';
import { stateSection } from './brain-state.js';
import { showNotices } from './brain-notices.js';
import { settingsSection } from './brain-settings.js';
import { deliverySection } from './brain-delivery.js';
import { telegramSection } from './brain-telegram.js';
import { createHealthWatch } from './health-watch.js';
import { startBanner } from './health-banner.js';

const POLL_MS = 15_000;

const SECTIONS = [
  pairingSection, interfacesSection, mcpSection, approvalsSection, allowancesSection,
  tokensSection, subscriptionsSection,
  memorySection, goalsSection, schedulesSection, stateSection, signalsSection, turnsSection,
  spendingSection, proactiveSection, deliverySection, telegramSection, settingsSection,
];

/** What a section's code gets: its element, a way to reload it, and to report errors. */
function makeSectionContext(definition) {
  const root = document.getElementById(definition.id);
  const errorLine = root.querySelector('.section-error');
  const ctx = {
    root,
    errorFrom: null, // 'load' or 'action': a good reload clears only a load's error
    loading: null,
    showError(message, from = 'action') {
      errorLine.textContent = message;
      ctx.errorFrom = from;
    },
    clearError() {
      errorLine.textContent = '';
      ctx.errorFrom = null;
    },
    /** Load the section (one load at a time); a failure is shown, never thrown. */
    reload() {
      if (!ctx.loading) {
        ctx.loading = runLoad(definition, ctx).finally(() => { ctx.loading = null; });
      }
      return ctx.loading;
    },
    /** Run an action the person started; its failure is shown in the section. */
    async guard(action) {
      ctx.clearError();
      try {
        return await action();
      } catch (error) {
        ctx.showError(messageOf(error), 'action');
        return undefined;
      }
    },
  };
  return ctx;
}

async function runLoad(definition, ctx) {
  ctx.root.setAttribute('aria-busy', 'true');
  try {
    await definition.load(ctx);
    if (ctx.errorFrom === 'load') ctx.clearError();
  } catch (error) {
    ctx.showError(messageOf(error), 'load');
  } finally {
    ctx.root.removeAttribute('aria-busy');
  }
}

function messageOf(error) {
  if (error && error.status === 401) return 'Not logged in; opening the login page…';
  return error && error.message ? error.message : 'Something went wrong.';
}

function startDashboard() {
  setupConfirmDialog();
  const contexts = SECTIONS.map((definition) => {
    const ctx = makeSectionContext(definition);
    ctx.root.querySelector('button.refresh').addEventListener('click', () => ctx.reload());
    if (definition.setup) definition.setup(ctx);
    return { definition, ctx };
  });
  for (const { ctx } of contexts) ctx.reload();
  const health = createHealthWatch(); // polls /health on its own: the banner and the notices
  startBanner(health);
  health.subscribe(showNotices);
  health.refresh();

  const live = contexts.filter(({ definition }) => definition.poll);
  const reloadLive = () => {
    if (document.visibilityState !== 'visible') return;
    for (const { ctx } of live) ctx.reload();
  };
  setInterval(reloadLive, POLL_MS);
  document.addEventListener('visibilitychange', reloadLive);
}

startDashboard();
