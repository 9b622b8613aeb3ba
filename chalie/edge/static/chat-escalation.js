// An escalation in the chat: a tool call waiting for the person's approval. Shows what Chalie
// asks, the tool and its arguments, a countdown to expiry, and Approve / Deny buttons that send
// the `approval` action. Decisions are remembered for the browser tab (sessionStorage), so a
// reload shows "Approved" rather than live buttons for a question already answered.

const DECISIONS_KEY = "chalie.decisions";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function loadDecisions() {
  try { return JSON.parse(sessionStorage.getItem(DECISIONS_KEY) || "{}") || {}; } catch { return {}; }
}

function rememberDecision(approvalId, approve) {
  const decisions = loadDecisions();
  decisions[approvalId] = approve;
  try { sessionStorage.setItem(DECISIONS_KEY, JSON.stringify(decisions)); } catch { /* ignore */ }
}

function prettyArgs(args) {
  if (typeof args !== "string") return JSON.stringify(args, null, 2);
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch { return args; }
}

function formatRemaining(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function stopCountdown(escalation) {
  clearInterval(escalation.timer);
  escalation.timer = 0;
}

/**
 * Finish an escalation: `approve` true/false shows the person's decision; null means the
 * question is over without one from this page (its turn ended, or it expired).
 */
export function settleEscalation(escalation, approve, why = "No longer waiting for an answer.") {
  if (escalation.settled) return;
  escalation.settled = true;
  stopCountdown(escalation);
  escalation.approve.disabled = true;
  escalation.deny.disabled = true;
  const remembered = loadDecisions()[escalation.approvalId];
  const decision = approve ?? remembered;
  if (decision === true || decision === false) {
    escalation.decision.textContent = decision ? "Approved" : "Denied";
    escalation.node.dataset.decision = decision ? "approved" : "denied";
  } else {
    escalation.decision.textContent = why;
  }
  escalation.expires.hidden = true;
}

function decide(escalation, approve, sendAction) {
  if (escalation.settled) return;
  const sent = sendAction({
    type: "action",
    payload: { skill: "approval", params: { approval_id: escalation.approvalId, approve } },
  });
  if (!sent) {
    escalation.decision.textContent = "Not connected: try again in a moment.";
    return;
  }
  rememberDecision(escalation.approvalId, approve);
  settleEscalation(escalation, approve);
}

// An escalation with expires_in_s 0 waits for nothing: the critic found that a consequential
// action may not have done what the person asked, and says so. It has no buttons.
export function isNotice(frame) {
  return !(Number(frame.expires_in_s) > 0);
}

export function createEscalation(frame, sendAction) {
  const notice = isNotice(frame);
  const node = el("section", notice ? "escalation notice" : "escalation");
  node.dataset.approvalId = frame.approval_id;
  node.setAttribute("aria-label", notice ? "Please check" : "Approval needed");
  const heading = el("p", "escalation-title",
    notice ? "Chalie asks you to check this" : "Chalie asks before going on");
  const content = el("p", "escalation-content", frame.content);
  const tool = el("p", "escalation-tool");
  tool.append("Tool: ", el("code", "", frame.tool));
  const args = el("pre", "escalation-args", prettyArgs(frame.args));
  const expires = el("p", "expires muted");
  const actions = el("div", "escalation-actions");
  const approve = el("button", "approve btn-primary", "Approve");
  const deny = el("button", "deny", "Deny");
  approve.type = "button";
  deny.type = "button";
  const decision = el("p", "decision");
  decision.setAttribute("aria-live", "polite");
  actions.append(approve, deny);
  node.append(heading, content, tool, args, expires, actions, decision);

  const escalation = {
    node, approve, deny, decision, expires, approvalId: frame.approval_id, settled: false, timer: 0,
  };
  if (notice) {
    actions.hidden = true;
    expires.hidden = true;
    escalation.settled = true;
    return escalation;
  }
  const remembered = loadDecisions()[frame.approval_id];
  if (remembered === true || remembered === false) {
    settleEscalation(escalation, remembered);
    return escalation;
  }
  const deadline = Date.now() + (Number(frame.expires_in_s) || 0) * 1000;
  const tick = () => {
    const left = (deadline - Date.now()) / 1000;
    if (left <= 0) { settleEscalation(escalation, null, "Expired: the question timed out."); return; }
    expires.textContent = `Expires in ${formatRemaining(left)}`;
  };
  tick();
  if (!escalation.settled) escalation.timer = setInterval(tick, 1000);
  approve.addEventListener("click", () => decide(escalation, true, sendAction));
  deny.addEventListener("click", () => decide(escalation, false, sendAction));
  return escalation;
}
