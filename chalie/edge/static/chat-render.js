// Turns /ws frames into the conversation's DOM in #messages: one article.exchange per turn
// (the person's message, stage, narrations, steering, cards, escalations, the answer, errors,
// metrics), plus notifications, goal progress lines, errors of no turn and calls held for the
// person's approval (chat-escalation.js). Knows which turn is running. Every value from the
// server goes in through textContent or renderMarkdown.

import { renderMarkdown } from "./markdown.js";
import {
  callDetails, createEscalation, decideEscalation, isNotice, reviseHeld, settleEscalation,
} from "./chat-escalation.js";
import { createCard } from "./chat-card.js";

const STAGE_WORDS = {
  processing: "Working…",
  retrieving_memory: "Remembering…",
  thinking: "Thinking…",
  responding: "Writing the answer…",
};
const WAITING_WORDS = "Waiting for your approval…";

const SOURCE_WORDS = {
  dmn: "A thought of Chalie's",
  schedule: "Scheduled prompt",
  goal: "Goal",
  interface: "From a paired program",
};

// The node a frame with a seq became carries it (data-seq), so that a notification's link
// (/#seq-<seq>) can find it.
function markSeq(node, frame) {
  if (node && typeof frame.seq === "number" && frame.seq > 0) node.dataset.seq = String(frame.seq);
}

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function blocksText(blocks) {
  return (Array.isArray(blocks) ? blocks : []).map((b) => (b && typeof b.text === "string" ? b.text : "")).join("\n\n");
}

function sentence(text) {
  const s = String(text ?? "").trim();
  return /[.!?…]$/.test(s) ? s : `${s}.`;
}

function formatSeconds(value) {
  const s = Number(value) || 0;
  return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

/**
 * log: the #messages element; announce(text): say it in the live region;
 * sendAction(frame) -> bool; onRunningChange(exchangeId | null).
 */
export function createRenderer({ log, announce, sendAction, onRunningChange }) {
  const exchanges = new Map(); // exchange_id -> state
  const running = new Set(); // exchange ids with processing seen and no done yet
  const held = new Map(); // approval_id -> a held escalation (no exchange of the person's)
  let heldCheck = 0; // the timer of the next look at GET /api/approvals
  const goals = new Map(); // goal_id -> {node, title, status, coverage}

  // Unacknowledged local echoes stay at the bottom: new content goes in above them.
  function appendToLog(node) {
    log.insertBefore(node, log.querySelector(":scope > .exchange.echo"));
  }

  function notifyRunning() { onRunningChange?.(runningExchangeId()); }

  function runningExchangeId() {
    let last = null;
    for (const id of running) last = id;
    return last;
  }

  function buildExchange(article) {
    article.classList.add("exchange");
    const ex = {
      article, user: article.querySelector(":scope > .msg.user"),
      narrations: el("ol", "narrations"), stage: el("p", "stage"), timeline: el("div", "timeline"),
      answer: null, error: null, metrics: null, final: false, done: false, text: "", deltas: 0,
      escalations: [], lastStage: "processing", waiting: new Set(), // approval ids not yet decided
    };
    ex.narrations.setAttribute("aria-label", "What Chalie did");
    ex.stage.hidden = true;
    article.append(ex.narrations, ex.stage, ex.timeline);
    return ex;
  }

  function exchangeFor(id, clientId) {
    let ex = exchanges.get(id);
    if (ex) return ex;
    const echo = clientId ? log.querySelector(`:scope > .exchange.echo[data-client-id="${CSS.escape(clientId)}"]`) : null;
    const article = echo || el("article");
    article.dataset.exchangeId = id;
    ex = buildExchange(article);
    exchanges.set(id, ex);
    if (echo) {
      echo.classList.remove("echo");
      ex.user?.classList.remove("pending");
      ex.user?.querySelector(".note")?.remove();
    }
    appendToLog(article); // an adopted echo moves up above the echoes still waiting
    return ex;
  }

  function userMessage(text, imageIds) {
    const msg = el("div", "msg user");
    msg.append(el("p", "msg-text", text || ""));
    if (Array.isArray(imageIds) && imageIds.length) {
      const strip = el("div", "thumbs");
      for (const id of imageIds) {
        const img = el("img", "thumb");
        img.src = `/api/images/${encodeURIComponent(id)}`;
        img.alt = "An image you sent";
        img.dataset.imageId = id;
        img.loading = "lazy";
        strip.append(img);
      }
      msg.append(strip);
    }
    return msg;
  }

  /** Show a chat the person sent (or queued) before the server acknowledged it. */
  function showEcho(chat, sent) {
    let article = log.querySelector(`:scope > .exchange.echo[data-client-id="${CSS.escape(chat.client_id)}"]`);
    if (!article) {
      article = el("article", "exchange echo");
      article.dataset.clientId = chat.client_id;
      article.append(userMessage(chat.text, chat.image_ids));
      log.append(article);
    }
    markEchoSent(article, sent);
  }

  function markEchoSent(article, sent) {
    const msg = article.querySelector(":scope > .msg.user");
    msg.classList.toggle("pending", !sent);
    const note = msg.querySelector(".note");
    if (!sent && !note) msg.append(el("span", "note", "not sent yet"));
    if (sent && note) note.remove();
  }

  /** Echoes of chats still pending: sent ones lose their "not sent yet" mark. */
  function syncEchoes(pending, wasSent) {
    for (const chat of pending) showEcho(chat, wasSent(chat.client_id));
  }

  function answerOf(ex) {
    if (!ex.answer) {
      ex.answer = el("div", "answer");
      ex.answer.dataset.state = "streaming";
      ex.answer.dataset.deltas = "0";
      ex.timeline.after(ex.answer);
    }
    return ex.answer;
  }

  function applyDelta(frame) {
    const ex = exchanges.get(frame.exchange_id);
    if (!ex || ex.final || ex.done) return; // unknown (its log not replayed yet) or answered
    const answer = answerOf(ex);
    ex.text = frame.reset ? String(frame.text ?? "") : ex.text + String(frame.text ?? "");
    ex.deltas += 1;
    answer.dataset.deltas = String(ex.deltas);
    answer.innerHTML = renderMarkdown(ex.text);
    // a growing answer says what is happening, unless the turn waits for the person
    ex.stage.hidden = Boolean(ex.text.trim()) && !ex.waiting.size;
  }

  /** The status line: what the turn does now (waiting for an approval comes first). */
  function showStage(ex, stage) {
    if (ex.done) return;
    if (stage) ex.lastStage = stage;
    const waiting = ex.waiting.size > 0;
    ex.stage.textContent = waiting ? WAITING_WORDS : (STAGE_WORDS[ex.lastStage] || "Working…");
    ex.stage.dataset.waiting = String(waiting);
    ex.stage.hidden = !waiting && Boolean(stage === null && ex.text.trim());
  }

  function onStatus(frame) {
    if (!frame.exchange_id) return;
    const ex = exchangeFor(frame.exchange_id, frame.client_id);
    if (frame.stage === "processing") {
      if (!ex.user && (frame.text || frame.image_ids)) {
        ex.user = userMessage(frame.text, frame.image_ids);
        // The turn's channel, when the person wrote from elsewhere than a page.
        if (frame.source === "telegram") ex.user.append(el("small", "msg-via muted", "via Telegram"));
        ex.article.prepend(ex.user);
      }
      if (!ex.done) { running.add(frame.exchange_id); notifyRunning(); }
    }
    showStage(ex, frame.stage);
  }

  // A sentence for people; the call's tool and arguments under a collapsed Details.
  function onNarration(frame) {
    const ex = exchangeFor(frame.exchange_id);
    const item = el("li", "narration");
    item.append(el("span", "narration-text", frame.text));
    const details = callDetails("narration-details", frame.tool, frame.args);
    if (details) item.append(details);
    ex.narrations.append(item);
  }

  function metricsDetails(metrics) {
    const details = el("details", "metrics");
    details.append(el("summary", "", "Details"));
    const list = el("dl");
    const tools = Object.entries(metrics.tools || {}).map(([name, count]) => `${name} ×${count}`);
    const rows = [["Tokens", String(metrics.tokens_total ?? 0)], ["Tools", tools.join(", ") || "none"],
      ["Time", formatSeconds(metrics.response_time_s)]];
    for (const [term, value] of rows) {
      const row = el("div");
      row.append(el("dt", "", term), el("dd", "", value));
      list.append(row);
    }
    details.append(list);
    return details;
  }

  function setMetrics(ex, metrics) {
    if (!metrics || typeof metrics !== "object") return;
    const details = metricsDetails(metrics);
    if (ex.metrics) ex.metrics.replaceWith(details); else ex.article.append(details);
    ex.metrics = details;
  }

  function onMessage(frame, live) {
    const ex = exchangeFor(frame.exchange_id);
    const answer = answerOf(ex);
    const text = blocksText(frame.blocks);
    answer.innerHTML = (Array.isArray(frame.blocks) ? frame.blocks : [])
      .map((b) => renderMarkdown(b && b.text)).join("\n");
    answer.dataset.state = "final";
    markSeq(answer, frame);
    ex.final = true;
    ex.text = text;
    setMetrics(ex, frame.metrics);
    if (live) announce(`Chalie: ${answer.textContent}`);
  }

  function onDone(frame) {
    const ex = exchangeFor(frame.exchange_id);
    ex.done = true;
    ex.article.dataset.done = "true";
    ex.stage.remove();
    if (ex.answer && !ex.final) ex.answer.dataset.state = "incomplete";
    for (const escalation of ex.escalations) settleEscalation(escalation);
    ex.waiting.clear();
    running.delete(frame.exchange_id);
    notifyRunning();
  }

  function onError(frame, live) {
    const message = String(frame.message ?? "Something went wrong.");
    if (!frame.exchange_id) {
      const p = el("p", "error", message);
      markSeq(p, frame);
      appendToLog(p);
      if (live) announce(`Error: ${message}`);
      return;
    }
    const ex = exchangeFor(frame.exchange_id);
    const p = el("p", "error", message);
    markSeq(p, frame);
    if (ex.error) ex.error.after(p); else (ex.answer || ex.timeline).after(p);
    ex.error = p;
    if (!ex.metrics) setMetrics(ex, frame.metrics);
    if (live) announce(`Error: ${message}`);
  }

  function onCard(frame) {
    const figure = createCard(frame);
    markSeq(figure, frame);
    if (frame.exchange_id) exchangeFor(frame.exchange_id).timeline.append(figure);
    else appendToLog(figure);
  }

  function onEscalation(frame, live) {
    if (frame.held) { onHeldEscalation(frame, live); return; }
    const ex = exchangeFor(frame.exchange_id);
    const escalation = createEscalation(frame, sendAction);
    markSeq(escalation.node, frame);
    ex.escalations.push(escalation);
    ex.timeline.append(escalation.node);
    if (ex.done) { settleEscalation(escalation); return; }
    if (isNotice(frame)) return;
    ex.waiting.add(String(frame.approval_id));
    showStage(ex, null);
    if (live) announce(`Chalie asks before using ${frame.tool}: ${sentence(frame.content)} Approve or deny it below.`);
  }

  // A call held for the person on a turn they did not watch (a program's message, the DMN, a
  // goal, a scheduled prompt): it stands on its own in the log, outside any exchange (no
  // exchange's `done` settles it), and waits for their answer, also after a reload; replayed
  // from the log, it is checked against the server.
  function onHeldEscalation(frame, live) {
    const id = String(frame.approval_id);
    if (held.has(id)) return;
    const escalation = createEscalation(frame, sendAction);
    markSeq(escalation.node, frame);
    held.set(id, escalation);
    appendToLog(escalation.node);
    if (live) announce(`Chalie asks before using ${frame.tool}: ${sentence(frame.content)} Approve or deny it.`);
    else checkHeldSoon();
  }

  function checkHeldSoon() {
    clearTimeout(heldCheck);
    heldCheck = setTimeout(() => reviseHeld(held), 300); // once, after the replay's burst
  }

  // The server's word on an escalation: every client shows it, whoever decided.
  function onDecision(frame) {
    const id = String(frame.approval_id);
    if (held.has(id)) { decideEscalation(held.get(id), frame); return; }
    const ex = exchanges.get(frame.exchange_id);
    const candidates = ex ? [ex] : exchanges.values();
    for (const each of candidates) {
      const escalation = each.escalations.find((e) => String(e.approvalId) === id);
      if (!escalation) continue;
      decideEscalation(escalation, frame);
      if (each.waiting.delete(id)) showStage(each, null);
      return;
    }
  }

  function onNotification(frame, live) {
    const article = el("article", "notification");
    article.dataset.source = frame.source || "";
    markSeq(article, frame);
    const source = frame.program ? `From ${frame.program}, a paired program`
      : SOURCE_WORDS[frame.source] || "Notification";
    article.append(el("p", "notification-source", source));
    const body = el("div", "notification-body");
    body.innerHTML = renderMarkdown(frame.content);
    article.append(body);
    appendToLog(article);
    if (live) announce(`Notification: ${body.textContent}`);
  }

  function onTask(frame) {
    let goal = goals.get(frame.goal_id);
    if (!goal) {
      goal = { node: el("p", "task"), title: "", status: "", coverage: 0 };
      goal.node.dataset.goalId = frame.goal_id;
      goals.set(frame.goal_id, goal);
      appendToLog(goal.node);
    }
    let step = "";
    if (frame.step_id === null || frame.step_id === undefined) {
      goal.title = frame.title || goal.title;
      goal.status = frame.status;
    } else {
      step = `Step “${frame.title}”: ${frame.status}`;
      if (!goal.status) goal.status = "running";
    }
    goal.coverage = Number(frame.coverage) || 0;
    const pct = Math.round(goal.coverage * 100);
    goal.node.textContent = `Goal: ${goal.title || "(untitled)"} — ${goal.status}, ${pct}%`;
    goal.node.dataset.status = goal.status;
    if (step) goal.node.append(el("span", "task-step", ` · ${step}`));
    if (frame.error) goal.node.append(el("span", "task-error", ` — ${frame.error}`));
  }

  function onImageReady(frame) {
    for (const img of log.querySelectorAll("img.thumb")) {
      if (img.dataset.imageId !== frame.image_id) continue;
      img.dataset.status = frame.status;
      if (frame.status === "failed") img.title = "The model could not look at this image";
    }
  }

  /** Render one frame; `live` is false while the page replays the conversation's history. */
  function renderFrame(frame, live = true) {
    switch (frame.type) {
      case "status": onStatus(frame); break;
      case "act_narration": onNarration(frame); break;
      case "message": onMessage(frame, live); break;
      case "done": onDone(frame); break;
      case "error": onError(frame, live); break;
      case "card": onCard(frame); break;
      case "escalation": onEscalation(frame, live); break;
      case "decision": onDecision(frame); break;
      case "notification": onNotification(frame, live); break;
      case "task": onTask(frame); break;
      case "image_ready": onImageReady(frame); break;
      default: break;
    }
  }

  /** Show mid-turn steering in the running exchange. */
  function showSteer(text) {
    const ex = exchanges.get(runningExchangeId());
    if (ex) ex.timeline.append(el("p", "steer", text));
  }

  return { renderFrame, applyDelta, showEcho, syncEchoes, showSteer, runningExchangeId };
}
