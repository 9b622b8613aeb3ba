// An escalation in the chat: a tool call waiting for the person's approval. Shows what Chalie
// asks (a sentence, and which program's words the call came from, when it did), the tool and
// its arguments once under a collapsed Details, a countdown to expiry, and Approve / Deny
// buttons that send the `approval` action, with "Always allow this tool" beside them when the
// server offers it. The outcome comes from the server's `decision` frame (logged, so every
// client shows it, after any reload or resume): approved, denied, expired or withdrawn, by the
// page or by a program. A held escalation (a call held on a turn the person did not watch)
// says so, and waits days rather than minutes.

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

/** A call's arguments (JSON text or a value) as indented JSON, or "" when there are none. */
export function prettyArgs(args) {
  if (args === undefined || args === null || args === "") return "";
  if (typeof args !== "string") return JSON.stringify(args, null, 2);
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch { return args; }
}

/** A collapsed "Details" with the tool's name and its arguments. */
export function callDetails(className, tool, args) {
  const pretty = prettyArgs(args);
  if (!tool && !pretty) return null;
  const details = el("details", className);
  details.append(el("summary", "", "Details"));
  if (tool) {
    const line = el("p", "call-tool");
    line.append("Tool: ", el("code", "", tool));
    details.append(line);
  }
  if (pretty && pretty !== "{}") details.append(el("pre", "call-args", pretty));
  return details;
}

const OUTCOME_WORDS = {
  approved: "Approved",
  denied: "Denied",
  expired: "Expired: no answer came in time",
  withdrawn: "Withdrawn: you steered Chalie elsewhere",
};

/** "4:05" under an hour; "5 h 12 min" under a day; "6 days 23 h" beyond (a held call). */
export function formatRemaining(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 3600) return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
  const hours = Math.floor(s / 3600);
  if (hours < 24) {
    const minutes = Math.floor((s % 3600) / 60);
    return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
  }
  const days = Math.floor(hours / 24);
  const words = `${days} ${days === 1 ? "day" : "days"}`;
  return hours % 24 ? `${words} ${hours % 24} h` : words;
}

function closeButtons(escalation) {
  clearInterval(escalation.timer);
  escalation.timer = 0;
  escalation.approve.disabled = true;
  escalation.deny.disabled = true;
  if (escalation.always) escalation.always.disabled = true;
  escalation.expires.hidden = true;
}

/** The words for a `decision` frame's outcome ("Approved by a program", ...). */
export function outcomeWords(outcome, by) {
  const words = OUTCOME_WORDS[outcome] || "Answered";
  return by === "program" ? `${words.split(":")[0]} by a program` : words;
}

/** Show the server's decision: final, whatever the page showed before. */
export function decideEscalation(escalation, frame) {
  escalation.settled = true;
  escalation.decided = true;
  closeButtons(escalation);
  escalation.decision.textContent = outcomeWords(frame.outcome, frame.by);
  escalation.node.dataset.decision = String(frame.outcome || "");
  if (frame.by) escalation.node.dataset.by = String(frame.by);
}

/**
 * The question is over without a decision frame seen (its turn ended): no more buttons. A
 * decision frame that comes later still shows its outcome.
 */
export function settleEscalation(escalation, why = "No longer waiting for an answer.") {
  if (escalation.settled) return;
  escalation.settled = true;
  closeButtons(escalation);
  escalation.decision.textContent = why;
}

function decide(escalation, approve, sendAction, always = false) {
  if (escalation.settled) return;
  const params = { approval_id: escalation.approvalId, approve };
  if (always) params.always = true;
  const sent = sendAction({ type: "action", payload: { skill: "approval", params } });
  if (!sent) {
    escalation.decision.textContent = "Not connected: try again in a moment.";
    return;
  }
  escalation.settled = true;
  closeButtons(escalation);
  escalation.decision.textContent = approve ? "Approving…" : "Denying…"; // the decision frame follows
}

// An escalation with expires_in_s 0 waits for nothing: the critic found that a consequential
// action may not have done what the person asked, and says so. It has no buttons.
export function isNotice(frame) {
  return !(Number(frame.expires_in_s) > 0);
}

function tick(escalation) {
  const left = (escalation.deadline - Date.now()) / 1000;
  if (left <= 0) { settleEscalation(escalation, "Expired: the question timed out."); return; }
  escalation.expires.textContent = `Expires in ${formatRemaining(left)}`;
}

/**
 * Held escalations replayed from the log (approval_id -> escalation) said how long they would
 * wait when they were asked: what GET /api/approvals says now corrects them (the deadline, or
 * that one expired). An answer's own decision frame is in the log and says more.
 */
export async function reviseHeld(held) {
  let items;
  try {
    const response = await fetch("/api/approvals?limit=1000",
      { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) return;
    ({ items } = await response.json());
  } catch {
    return; // offline: the countdown stays as the log said; an answer still gets the truth
  }
  for (const item of Array.isArray(items) ? items : []) {
    const escalation = held.get(String(item.id));
    if (!escalation || escalation.settled) continue;
    if (item.status === "waiting") {
      escalation.deadline = Number(item.expires_at) * 1000;
      tick(escalation);
    } else if (item.status === "expired") {
      settleEscalation(escalation, OUTCOME_WORDS.expired);
      escalation.node.dataset.decision = "expired";
    }
  }
}

export function createEscalation(frame, sendAction) {
  const notice = isNotice(frame);
  const node = el("section", notice ? "escalation notice" : "escalation");
  node.dataset.approvalId = frame.approval_id;
  node.setAttribute("aria-label", notice ? "Please check" : "Approval needed");
  const heading = el("p", "escalation-title",
    notice ? "Chalie asks you to check this"
      : frame.why ? "Another program's words asked for this" : "Chalie asks before going on");
  const content = el("p", "escalation-content", frame.content);
  // A held call came up on a turn the person did not watch: it says so, standing on its own.
  const heldNote = frame.held ? el("p", "escalation-held muted",
    "Held for you: it came up while Chalie worked on its own.") : null;
  if (heldNote) {
    node.classList.add("held");
    node.setAttribute("aria-label", "Approval needed, held for you");
  }
  const details = callDetails("escalation-details", frame.tool, frame.args);
  const expires = el("p", "expires muted");
  const actions = el("div", "escalation-actions");
  const approve = el("button", "approve btn-primary", "Approve");
  const deny = el("button", "deny", "Deny");
  approve.type = "button";
  deny.type = "button";
  const always = frame.always ? el("button", "always", "Always allow this tool") : null;
  if (always) always.type = "button";
  const decision = el("p", "decision");
  decision.setAttribute("aria-live", "polite");
  actions.append(approve, deny);
  if (always) actions.append(always);
  node.append(heading);
  if (heldNote) node.append(heldNote);
  node.append(content);
  if (details) node.append(details);
  node.append(expires, actions, decision);

  const escalation = {
    node, approve, deny, always, decision, expires, approvalId: frame.approval_id,
    settled: false, decided: false, timer: 0, notice,
    deadline: Date.now() + (Number(frame.expires_in_s) || 0) * 1000,
  };
  if (notice) {
    actions.hidden = true;
    expires.hidden = true;
    escalation.settled = true;
    return escalation;
  }
  tick(escalation);
  if (!escalation.settled) escalation.timer = setInterval(() => tick(escalation), 1000);
  approve.addEventListener("click", () => decide(escalation, true, sendAction));
  deny.addEventListener("click", () => decide(escalation, false, sendAction));
  always?.addEventListener("click", () => decide(escalation, true, sendAction, true));
  return escalation;
}
