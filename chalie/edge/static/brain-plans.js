// The brain dashboard's goals and scheduled prompts: list them with their progress and
// plans, add new ones, and cancel one after a confirmation.

import { callApi, withQuery } from './brain-api.js';
import {
  el, field, renderList, forgetShown, loadWhenOpened, askToConfirm, announce, formatEpoch,
  formatIso, formatNumber, isoWithLocalOffset, shorten,
} from './brain-ui.js';

const ACTIVE_GOAL_STATES = new Set(['pending', 'planning', 'running']);
// Why a goal ended (its `end_reason`), in words.
const END_REASONS = {
  completed: 'Completed: its last step gave the result.',
  step_failed: 'Failed: a step could not be done.',
  out_of_iterations: 'Failed: it used all the model calls a goal may make.',
  out_of_time: 'Failed: it used all the time a goal may take.',
  planning_error: 'Failed: the model could not be asked for a plan.',
  crashed: 'Failed: it kept crashing.',
  cancelled: 'Cancelled.',
  expired: 'Expired: it waited too long for the background budget.',
};

// --- #goals -----------------------------------------------------------------------------------

function buildStep(step) {
  return el('li', { className: 'step', dataset: { id: step.id } },
    el('span', { className: `step-status badge status-${step.status}`, text: step.status }), ' ',
    el('span', { className: 'wrap', text: step.description }),
    step.result ? el('p', { className: 'step-result wrap muted', text: step.result }) : null,
    step.attempts > 1 ? el('p', { className: 'meta', text: `${step.attempts} attempts` }) : null);
}

function buildPlan(goal) {
  const plan = goal.plan;
  if (!plan || !plan.steps || !plan.steps.length) {
    return el('p', { className: 'muted', text: 'No plan yet.' });
  }
  return el('div', {},
    typeof plan.confidence === 'number'
      ? el('p', { className: 'meta', text: `Confidence ${Math.round(plan.confidence * 100)}%` })
      : null,
    el('ol', { className: 'steps' }, plan.steps.map(buildStep)));
}

/** A goal that runs without a plan says so, and why: the checks its two plans failed. */
function buildPlain(goal) {
  const problems = goal.plan_problems || [];
  return el('div', { className: 'plain-mode' },
    el('p', { className: 'meta', text: 'Ran without a plan: no plan passed the checks, so it worked on the goal directly.' }),
    problems.length
      ? el('ul', { className: 'plan-problems muted' },
        problems.map((problem) => el('li', { className: 'wrap', text: problem })))
      : null);
}

function buildGoal(goal, ctx) {
  const percent = Math.round((goal.coverage || 0) * 100);
  const plan = el('details', { className: 'plan' },
    el('summary', { text: 'Plan' }),
    el('div', { className: 'plan-body muted', text: 'Loading…' }));
  loadWhenOpened(plan, async () => {
    const body = plan.querySelector('.plan-body');
    try {
      const full = await callApi(`/api/goals/${encodeURIComponent(goal.id)}`);
      body.className = 'plan-body';
      body.replaceChildren(buildPlan(full));
    } catch (error) {
      body.className = 'plan-body error-text';
      body.textContent = error.message;
      throw error;
    }
  });
  return el('li', { className: 'goal item', dataset: { id: goal.id } },
    el('p', { className: 'goal-text wrap' }, el('strong', { text: goal.goal })),
    el('div', { className: 'goal-progress' },
      el('span', { className: `state badge status-${goal.state}`, text: goal.state }),
      el('progress', {
        max: 1, value: goal.coverage || 0, 'aria-label': `Progress: ${percent}% of the plan done`,
      }),
      el('span', { className: 'muted', text: `${percent}%` })),
    goal.paused_until
      ? el('p', { className: 'meta', text: `Paused until ${formatEpoch(goal.paused_until)}` }) : null,
    goal.mode === 'plain' ? buildPlain(goal) : null,
    goal.end_reason
      ? el('p', { className: 'end-reason meta', text: END_REASONS[goal.end_reason] || goal.end_reason })
      : null,
    goal.result ? el('p', { className: 'goal-result wrap', text: goal.result }) : null,
    goal.error ? el('p', { className: 'error-text wrap', text: goal.error }) : null,
    el('p', { className: 'meta' },
      field('added', formatEpoch(goal.created_at)), ' ',
      field('tokens', formatNumber(goal.tokens))),
    plan,
    ACTIVE_GOAL_STATES.has(goal.state)
      ? el('div', { className: 'actions' },
        el('button', {
          type: 'button', className: 'cancel btn-danger', text: 'Cancel goal',
          'aria-label': `Cancel the goal: ${shorten(goal.goal, 60)}`,
          on: { click: (event) => cancelGoal(goal, event.currentTarget, ctx) },
        }))
      : null);
}

async function cancelGoal(goal, button, ctx) {
  const sure = await askToConfirm(`Cancel the goal “${shorten(goal.goal, 120)}”?`, button);
  if (!sure) return;
  const done = await ctx.guard(() =>
    callApi(`/api/goals/${encodeURIComponent(goal.id)}`, { method: 'DELETE' }));
  if (done) announce('Goal cancelled.');
  forgetShown(document.getElementById('goals-list'));
  await ctx.reload();
}

async function addGoal(input, ctx) {
  const goal = input.value.trim();
  if (!goal) return;
  const created = await ctx.guard(() => callApi('/api/goals', { method: 'POST', body: { goal } }));
  if (!created) return;
  input.value = '';
  announce('Goal added.');
  await ctx.reload();
}

export const goalsSection = {
  id: 'goals',
  poll: true,
  setup(ctx) {
    const form = document.getElementById('goal-form');
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      addGoal(document.getElementById('goal-text'), ctx);
    });
  },
  async load(ctx) {
    const { items } = await callApi('/api/goals');
    renderList(document.getElementById('goals-list'), items,
      (goal) => buildGoal(goal, ctx), 'No goals yet.');
  },
};

// --- #schedules -------------------------------------------------------------------------------

function buildSchedule(item, ctx) {
  return el('li', { className: 'schedule item', dataset: { id: item.id } },
    el('p', { className: 'schedule-prompt wrap' }, el('strong', { text: item.prompt })),
    el('p', { className: 'meta' },
      field('next run', formatIso(item.next_run)), ' ',
      item.cron ? field('repeats', item.cron, 'cron') : field('once at', formatIso(item.at)), ' ',
      field('time zone', item.timezone),
      item.last_run ? [' ', field('last run', formatIso(item.last_run))] : null),
    el('div', { className: 'actions' },
      el('button', {
        type: 'button', className: 'cancel btn-danger', text: 'Cancel',
        'aria-label': `Cancel the scheduled prompt: ${shorten(item.prompt, 60)}`,
        on: { click: (event) => cancelSchedule(item, event.currentTarget, ctx) },
      })));
}

async function cancelSchedule(item, button, ctx) {
  const sure = await askToConfirm(
    `Cancel the scheduled prompt “${shorten(item.prompt, 120)}”? It will not run again.`, button);
  if (!sure) return;
  const done = await ctx.guard(() =>
    callApi(`/api/schedules/${encodeURIComponent(item.id)}`, { method: 'DELETE' }));
  if (done) announce('Scheduled prompt cancelled.');
  await ctx.reload();
}

function scheduleBody(form) {
  const prompt = form.elements.prompt.value.trim();
  if (document.getElementById('schedule-repeating').checked) {
    const timezone = form.elements.timezone.value.trim();
    return { prompt, cron: form.elements.cron.value.trim(), ...(timezone ? { timezone } : {}) };
  }
  return { prompt, at: isoWithLocalOffset(form.elements.at.value) };
}

async function addSchedule(form, ctx) {
  const body = scheduleBody(form);
  const created = await ctx.guard(() => callApi('/api/schedules', { method: 'POST', body }));
  if (!created) return;
  form.elements.prompt.value = '';
  form.elements.at.value = '';
  form.elements.cron.value = '';
  announce(`Scheduled; next run ${formatIso(created.next_run)}.`);
  await ctx.reload();
}

/** Show the fields of the chosen kind (once or repeating), and require only those. */
function showScheduleKind() {
  const repeating = document.getElementById('schedule-repeating').checked;
  document.getElementById('schedule-once-fields').hidden = repeating;
  document.getElementById('schedule-repeating-fields').hidden = !repeating;
  document.getElementById('schedule-at').required = !repeating;
  document.getElementById('schedule-cron').required = repeating;
}

export const schedulesSection = {
  id: 'schedules',
  setup(ctx) {
    const form = document.getElementById('schedule-form');
    const zone = document.getElementById('schedule-timezone');
    zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone || '';
    for (const radio of form.querySelectorAll('input[name="schedule-kind"]')) {
      radio.addEventListener('change', showScheduleKind);
    }
    showScheduleKind();
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      addSchedule(form, ctx);
    });
  },
  async load(ctx) {
    const { items } = await callApi(withQuery('/api/schedules', { state: 'active' }));
    renderList(document.getElementById('schedules-list'), items,
      (item) => buildSchedule(item, ctx), 'No scheduled prompts.');
  },
};
