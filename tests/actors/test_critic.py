"""The critic, as the person sees it: after a consequential tool call on the user path one light
check compares the result with what they asked for. A result that needs their attention is shown
to them as an escalation that waits for nothing; a correctable one reaches the model's next
request; an ok one costs one more call and nothing else. Safe tools, background paths, a critic
turned off and a check that fails all leave the turn as it would be without it."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest

from chalie.act.budget import PromptBudget
from chalie.act.critic import Critic
from chalie.act.loop import ActLoop
from chalie.actors.driver import TurnDriver
from chalie.actors.driver_deps import DriverDeps, Ending, Policy
from chalie.actors.turn import Turn
from chalie.actors.work import Work
from chalie.clock import ManualClock
from chalie.frames import Frame
from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage
from chalie.llm.types import ToolSpec
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.registry import ToolRegistry
from tests.actors.conftest import (
    GatedProvider,
    InlineExecutor,
    Tree,
    answer,
    calls,
    prompt,
    shape,
)

ASK = "Book a meeting with Alice on Monday at 10"
BOOK = ScriptCall("book_meeting", {"who": "Alice", "day": "Monday", "time": "10:00"})
ARGS = '{"who":"Alice","day":"Monday","time":"10:00"}'
RESULT = "booked: Tuesday 15:00 with Bob"
REASON = "It booked Tuesday 15:00 with Bob, not Monday 10:00 with Alice."
CONSEQUENTIAL = {"consequential": ["book_meeting"]}


class BookTool:
    """A calendar whose booking does not match what it was asked (a safe tool unless told)."""

    danger = "safe"
    spec = ToolSpec("book_meeting", "Book a meeting.", {"type": "object", "properties": {}})

    def __init__(self, *, fails: bool = False) -> None:
        self._fails = fails

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        if self._fails:
            return ToolOutcome("error: the calendar is offline", is_error=True)
        return ToolOutcome(RESULT)


def verdict(verdict: str, reason: str = "", prompt_tokens: int = 40,
            completion_tokens: int = 8) -> ScriptStep:
    """The light model's critique, as JSON."""
    return ScriptStep(text=json.dumps({"verdict": verdict, "reason": reason}),
                      usage=ScriptUsage(prompt_tokens, completion_tokens))


def booking(start_tree: Any, *steps: ScriptStep, cognition: dict[str, Any] | None = None,
            **options: Any) -> tuple[Tree, Any]:
    """A tree with the booking tool and a model that books first, then `steps`."""
    provider = options.pop("provider", None) or ScriptedProvider(
        [calls(BOOK), *steps])
    tree = start_tree(provider, tools=[BookTool(fails=options.pop("fails", False))],
                      cognition=CONSEQUENTIAL if cognition is None else cognition, **options)
    return tree, provider


def snapshot_purposes(tree: Tree, exchange: str) -> list[str]:
    return [p for (p,) in tree.rows("SELECT purpose FROM prompt_snapshots WHERE turn_id = ? "
                                    "ORDER BY call", exchange)]


def test_a_result_that_contradicts_the_request_is_escalated_to_the_person(
    start_tree: Any,
) -> None:
    """The person gets an escalation with the critic's reason that waits for no answer, and the
    model's next request carries the critique, so its answer can say so."""
    tree, provider = booking(start_tree, verdict("needs_attention", REASON),
                             answer("I booked it, but please check: it went to Tuesday.", 50, 9))
    tree.chat(ASK)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3),
                             ("escalation", 4), ("message", 5), ("done", 6)]
    assert frames[3] == {
        "type": "escalation", "seq": 4,
        "content": f"Please check: {REASON} (after book_meeting)",
        "approval_id": "critic-call_0", "tool": "book_meeting", "args": ARGS,
        "expires_in_s": 0.0, "exchange_id": exchange, "topic": None, "why": None,
        "always": False, "held": False,
    }
    check = provider.requests[1]
    assert check.response_format is not None
    assert check.response_format.name == "critique"
    assert check.tools == ()
    assert ASK in prompt(check)
    assert f"book_meeting {ARGS}\n\nWhat it returned:\n{RESULT}" in prompt(check)
    assert prompt(provider.requests[2]).endswith(
        f"[1] book_meeting {ARGS}\n-> {RESULT}\n\n"
        "[2] CHECK of your book_meeting call: it may not do what the person asked, and they have "
        "been asked to look at it. Mention it in your answer and do not redo the call without "
        f"them. The problem: {REASON}"
    )
    assert frames[4]["metrics"]["tokens_total"] == 25 + 48 + 59
    assert tree.rows("SELECT outcome, llm_calls, tokens_total FROM turns") == [
        ("answered", 3, 132)
    ]
    assert snapshot_purposes(tree, exchange) == ["act", "critic", "act"]


def test_an_approved_confirm_tool_is_checked_and_a_correctable_result_reaches_the_model(
    start_tree: Any,
) -> None:
    """A `confirm` tool needs no naming to be checked; a correctable critique goes into the
    model's next request, and the person sees no second escalation."""
    tree, provider = booking(start_tree, verdict("correctable", "Wrong day: Tuesday."),
                             calls(BOOK), verdict("ok"), answer("Booked for Monday."),
                             cognition={}, confirm=("book_meeting",))
    tree.chat(ASK)
    asked = tree.outbox.wait_for_type("escalation")[-1]
    tree.answer_approval(asked["approval_id"], True)
    again = tree.outbox.wait_for_type("escalation", 2)[-1]
    assert again["expires_in_s"] == 120.0  # the model tried again: asked again, not critiqued
    tree.answer_approval(again["approval_id"], True)
    frames = tree.outbox.wait_for_type("done")
    assert [f["type"] for f in frames].count("escalation") == 2
    assert all(not f["approval_id"].startswith("critic-") for f in frames
               if f["type"] == "escalation")
    assert frames[-2]["blocks"] == [{"type": "text", "text": "Booked for Monday."}]
    assert prompt(provider.requests[2]).endswith(
        "[2] CHECK of your book_meeting call: it may not do what the person asked. Put it right "
        "with another call if you can, or tell them. The problem: Wrong day: Tuesday."
    )
    assert [r.response_format is not None for r in provider.requests] == [
        False, True, False, True, False]


def test_an_ok_result_costs_one_light_call_and_nothing_else(start_tree: Any) -> None:
    """The person sees exactly what they would without the critic; its tokens count in the
    turn's metrics and its request is kept with the turn's snapshots."""
    tree, provider = booking(start_tree, verdict("ok", "", 30, 5), answer("Booked.", 50, 3))
    tree.chat(ASK)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3),
                             ("message", 4), ("done", 5)]
    assert frames[3]["metrics"]["tokens_total"] == 25 + 35 + 53
    assert len(provider.requests) == 3
    assert "CHECK" not in prompt(provider.requests[2])
    assert snapshot_purposes(tree, frames[0]["exchange_id"]) == ["act", "critic", "act"]
    assert tree.rows("SELECT llm_calls FROM turns") == [(3,)]


def test_a_safe_tool_is_never_checked(start_tree: Any) -> None:
    """A tool that is neither `confirm` nor named consequential runs with no check at all."""
    tree, provider = booking(start_tree, answer("Booked."), cognition={})
    tree.chat(ASK)
    frames = tree.outbox.wait_for_type("done")
    assert frames[-2]["metrics"]["tokens_total"] == 25 + 12
    assert [r.response_format for r in provider.requests] == [None, None]


def test_a_critic_turned_off_checks_nothing(start_tree: Any) -> None:
    """cognition.critic = false: even a tool named consequential is not checked."""
    tree, provider = booking(start_tree, answer("Booked."),
                             cognition={"critic": False, "consequential": ["book_meeting"]})
    tree.chat(ASK)
    tree.outbox.wait_for_type("done")
    assert len(provider.requests) == 2
    assert tree.rows("SELECT llm_calls FROM turns") == [(2,)]


def test_a_call_that_failed_is_not_checked(start_tree: Any) -> None:
    """A tool call that errored tells the model so already: nothing to check."""
    tree, provider = booking(start_tree, answer("The calendar is offline."), fails=True)
    tree.chat(ASK)
    tree.outbox.wait_for_type("done")
    assert len(provider.requests) == 2


@pytest.mark.parametrize(("failing", "tokens", "error"), [
    (ScriptStep(fail="connection refused"), 25 + 12, "connection refused"),
    (ScriptStep(text="looks fine", usage=ScriptUsage(30, 2)), 25 + 32 + 12, "no JSON object"),
])
def test_a_check_that_fails_leaves_the_turn_answering(
    start_tree: Any, log_records: list[Any], failing: ScriptStep, tokens: int, error: str,
) -> None:
    """The light model down or answering nonsense: a warning, and the turn goes on as if ok
    (a reply that came still counts its tokens)."""
    tree, provider = booking(start_tree, failing, answer("Booked."))
    tree.chat(ASK)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3),
                             ("message", 4), ("done", 5)]
    assert frames[3]["blocks"] == [{"type": "text", "text": "Booked."}]
    assert frames[3]["metrics"]["tokens_total"] == tokens
    assert "CHECK" not in prompt(provider.requests[2])
    (failed,) = [r.getMessage() for r in log_records
                 if r.levelname == "WARNING" and "critic_failed" in r.getMessage()]
    assert error in failed


def test_steering_while_the_check_runs_reaches_the_next_request(start_tree: Any) -> None:
    """Words the person sends while the critic is out go into the model's next request."""
    provider = GatedProvider([calls(BOOK), verdict("ok"), answer("Moved to 11.")], hold=(1,))
    tree, _ = booking(start_tree, provider=provider, threaded=True)
    tree.chat(ASK)
    provider.wait_entered(1)
    tree.steer("make it 11 instead")
    tree.settle()
    provider.release(1)
    frames = tree.outbox.wait_for_type("done")
    assert frames[-2]["blocks"] == [{"type": "text", "text": "Moved to 11."}]
    assert "make it 11 instead" in prompt(provider.requests[2])


def test_cancelling_while_the_check_runs_stops_the_turn(start_tree: Any) -> None:
    """A cancel phrase while the critic is out ends the turn at once; the late check is
    dropped and nothing follows the turn's done."""
    provider = GatedProvider([calls(BOOK), verdict("needs_attention", REASON)], hold=(1,))
    tree, _ = booking(start_tree, provider=provider, threaded=True)
    tree.chat(ASK)
    provider.wait_entered(1)
    tree.steer("stop")
    frames = tree.outbox.wait_for_type("done")
    provider.release(1)
    tree.wait_until(lambda: tree.metric("chalie_llm_calls_total", result="ok") == 2,
                    "the held check to come back")
    tree.settle()
    assert tree.outbox.frames() == frames
    assert [f["type"] for f in frames][-2:] == ["message", "done"]
    assert frames[-2]["blocks"] == [{"type": "text", "text": "Okay, I've stopped."}]


def test_the_turn_deadline_still_applies_while_the_check_runs(start_tree: Any) -> None:
    """A check that outlasts the turn's budget does not hold the turn: it times out."""
    provider = GatedProvider([calls(BOOK), verdict("ok")], hold=(1,))
    tree, _ = booking(start_tree, provider=provider, threaded=True, act={"timeout_s": 10.0})
    tree.chat(ASK)
    provider.wait_entered(1)
    tree.clock.advance(10.5)
    frames = tree.outbox.wait_for_type("done")
    provider.release(1)
    assert frames[-2]["type"] == "error"
    assert frames[-2]["message"] == "the turn took longer than 10s and was stopped"


class _Host:
    """A driver's host that collects frames and endings and queues messages for the test."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.endings: list[Ending] = []
        self.inbox: deque[Any] = deque()

    def show(self, *frames: Frame) -> None:
        self.frames.extend(frames)

    def turn_ended(self, ending: Ending) -> None:
        self.endings.append(ending)

    def state_written(self, turn: Turn, summary: str) -> None:
        raise AssertionError("no compaction expected")

    def tell_self(self, message: Any) -> None:
        self.inbox.append(message)


def test_an_unattended_path_never_runs_the_critic() -> None:
    """A background path's turn (nobody watching) runs a consequential tool with no check, even
    with a critic configured."""
    prompts = Prompts.load()
    provider = ScriptedProvider([calls(BOOK), answer("Booked.")])
    clock, host = ManualClock(), _Host()
    driver = TurnDriver(host=host, policy=Policy("scheduled", attended=False), deps=DriverDeps(
        work=Work(InlineExecutor(), provider, Metrics(), path="scheduled"),
        tools=ToolRegistry([BookTool()]), clock=clock, read=lambda: None,  # type: ignore[arg-type,return-value]
        channel="main", request_timeout_s=30.0, approval_timeout_s=120.0,
        critic=Critic(prompts, frozenset({"book_meeting"})),
    ))
    loop = ActLoop(prompts=prompts, user_text=ASK, history=(), tools=(BookTool.spec,),
                   max_iterations=3, max_result_chars=500, now_text="now")
    driver.begin(Turn(id="t1", loop=loop, budget=PromptBudget(8192, 0.8),
                      started_at=clock.time(), received_at=clock.monotonic(), timeout_s=60.0,
                      source="scheduled"))
    driver.ask()
    while host.inbox:
        assert driver.handle(host.inbox.popleft())
    (ending,) = host.endings
    assert (ending.outcome, ending.text) == ("answered", "Booked.")
    assert len(provider.requests) == 2
    assert [s.purpose for s in ending.turn.snapshots] == ["act", "act"]
    assert host.frames == []
