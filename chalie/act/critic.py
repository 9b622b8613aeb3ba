"""The critic, the pure part: which tool calls are checked, the check's request, its reply read.

After a consequential tool call on the user path (danger class `confirm`, or a tool named in
`cognition.consequential`) that did not fail, the turn driver asks the light model one question
(prompts/critic.md, structured output): does this result do what the person asked for? The
answer is a verdict and a reason:

- `ok`: nothing more happens;
- `correctable`: the critique goes into the turn's trail, so the model reads it on its next
  request and may put things right itself;
- `needs_attention`: the person is told with an `escalation` frame that waits for nothing
  (`expires_in_s` 0, approval id "critic-<call id>"), and the critique goes into the trail too.

A check that cannot be made (the call fails, times out, or its reply cannot be read) counts as
`ok`: the critic never fails or stalls a turn. `check` runs on the worker pool; `absorb` puts
what it came to into the turn's loop, and returns the frame for the person, if any.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import structlog

from chalie.act.loop import ActLoop
from chalie.config import CognitionConfig
from chalie.errors import StructuredOutputError
from chalie.frames import Escalation
from chalie.llm.structured import decode_structured, structured
from chalie.llm.types import ChatRequest, ChatResponse, Message, ToolCall
from chalie.prompts import Prompts

log = structlog.get_logger("chalie.critic")

Verdict = Literal["ok", "correctable", "needs_attention"]

MAX_REASON_CHARS = 400  # a longer reason is cut: it goes to the person and into the trail
APPROVAL_PREFIX = "critic-"  # the escalation's approval_id: this and the call's id


class Critique(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    verdict: Verdict
    reason: str


FORMAT = structured("critique", Critique)


class Checked(msgspec.Struct, frozen=True):
    """What one check came to. `response` is None when the call failed; `critique` is None
    when there is no verdict, and `error` then says why."""

    response: ChatResponse | None
    critique: Critique | None
    error: str = ""


@dataclass(frozen=True)
class Critic:
    """The critic as configured: on, with the tools it checks besides `confirm` ones."""

    prompts: Prompts
    consequential: frozenset[str] = frozenset()

    @classmethod
    def of(cls, config: CognitionConfig | None, prompts: Prompts) -> Critic | None:
        """The critic `[cognition]` asks for, or None when it is off (or not configured)."""
        if config is None or not config.critic:
            return None
        return cls(prompts, frozenset(config.consequential))

    def checks(self, tool: str, danger: str) -> bool:
        """Whether a call of `tool` (of danger class `danger`) is consequential: checked."""
        return danger == "confirm" or tool in self.consequential

    def request(self, loop: ActLoop, call: ToolCall, result: str) -> ChatRequest:
        """The check of one call: what the person asked (their message, then anything they
        sent while the turn ran), the call and what it returned (as the trail holds it)."""
        f = self.prompts.fragment
        later = "\n".join(f("critic_steering", text=s.text) for s in loop.steering)
        body = self.prompts.render(
            "critic", user_text=loop.user_text, steering=later or f("critic_no_steering"),
            tool=call.name, args=call.raw_args or "{}", result=result,
        )
        return ChatRequest(system="", messages=(Message("user", body),), response_format=FORMAT)


def parse(text: str) -> Critique:
    """A reply as a Critique. The verdict is read leniently ("Needs attention" is
    needs_attention); a reason is cut at MAX_REASON_CHARS, and only `ok` may leave it empty.
    Raises StructuredOutputError saying what is wrong."""
    raw: dict[str, Any] = decode_structured(text, dict[str, Any])
    verdict = raw.get("verdict")
    if isinstance(verdict, str):
        raw["verdict"] = verdict.strip().lower().replace(" ", "_").replace("-", "_")
    reason = raw.get("reason")
    if isinstance(reason, str):
        reason = " ".join(reason.split())
        raw["reason"] = reason if len(reason) <= MAX_REASON_CHARS else (
            reason[:MAX_REASON_CHARS] + "…")
    try:
        critique = msgspec.convert(raw, Critique)
    except msgspec.ValidationError as e:
        raise StructuredOutputError(f"the critique does not match the schema: {e}") from None
    if critique.verdict != "ok" and not critique.reason:
        raise StructuredOutputError(f"a {critique.verdict} verdict needs a reason")
    return critique


def check(call_llm: Callable[[ChatRequest], ChatResponse], request: ChatRequest) -> Checked:
    """On a worker thread: ask, and read the reply. Any failure is a Checked with no critique,
    never an exception: a check that cannot be made must not end the turn."""
    try:
        response = call_llm(request)
    except Exception as e:  # the provider, a timeout, or a bug: all mean "no verdict"
        return Checked(None, None, f"the check failed: {e}")
    try:
        return Checked(response, parse(response.text))
    except StructuredOutputError as e:
        return Checked(response, None, f"the check's reply could not be read: {e}")


def absorb(loop: ActLoop, call: ToolCall, checked: Checked, *,
           exchange_id: str) -> Escalation | None:
    """What a check came to, into the turn's loop: its tokens, and the critique in the trail
    unless the result is ok. Returns the escalation frame when the person must look."""
    if checked.response is not None:
        loop.count(checked.response)  # the check's tokens are the turn's
    critique = checked.critique
    if critique is None:
        log.warning("critic_failed", tool=call.name, error=checked.error)
        return None
    log.info("critic_verdict", tool=call.name, verdict=critique.verdict)
    if critique.verdict == "ok":
        return None
    if critique.verdict == "correctable":
        loop.note("critic_correctable", name=call.name, reason=critique.reason)
        return None
    loop.note("critic_attention", name=call.name, reason=critique.reason)
    return Escalation(
        content=f"Please check: {critique.reason} (after {call.name})",
        approval_id=APPROVAL_PREFIX + call.call_id, tool=call.name, args=call.raw_args,
        expires_in_s=0.0, exchange_id=exchange_id,
    )
