"""Mid-turn compaction as a client sees it: a tool trail that outgrows the context window is
summarised; when that is not enough the channel is checkpointed into "Current State" and the
loop restarts; after a turn, a history too big for the next prompt is checkpointed by the
backstop. A long history alone never overflows: the context budget drops its oldest lines.

Sizes were measured with chalie.act.budget.raw_estimate: with llm.context_window 1000 the budget
is 800 tokens (act.compaction_threshold 0.8) and the prompt's sections share 750 of them
(context.reply_reserve 0.25); a bare first request is about 600."""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.act.budget import raw_estimate
from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep
from chalie.llm.types import ChatRequest, ChatResponse, TextSink
from chalie.prompts import Prompts
from tests.actors.conftest import Tree, answer, calls, prompt, shape, store_turns

WINDOW = {"context_window": 1000}
LIMIT = 800
PLAN = "Water the tomatoes at seven, then call the plumber about the leak. " * 15  # 1005 chars
PLAN_CALL = ScriptCall("memory", {"action": "remember", "key": "plan", "value": PLAN})
PLAN_ARGS = msgspec.json.encode(PLAN_CALL.args).decode()
SUMMARY = "Stored the person's plan (tomatoes at seven, then the plumber) under the key plan."
STATE = "The person is Ada. She is planning her garden and talked through four topics with you."
RESTARTED = ("(The loop restarted after compaction: your earlier work on this message is "
             "summarised in Current State.)")
PROMPTS = Prompts.load()


class Uncalibrated:
    """A scripted LLM whose usage counts as estimated, so the prompt budget keeps its plain
    4-characters-a-token count; it records the time budget each call was given."""

    def __init__(self, steps: list[ScriptStep]) -> None:
        self._script = ScriptedProvider(steps)
        self.requests = self._script.requests
        self.timeouts: list[float] = []

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        self.timeouts.append(timeout_s)
        response = self._script.complete(request, timeout_s=timeout_s, on_text=on_text)
        usage = msgspec.structs.replace(response.usage, estimated=True)
        return msgspec.structs.replace(response, usage=usage)

    def close(self) -> None:
        pass


def seed_history(tree: Tree, pairs: list[tuple[str, str]]) -> str:
    """Store answered turns as the StoreWriter would; returns their history as prompts show it."""
    store_turns(tree, pairs)
    return "\n".join(f"Person: {said}\nYou: {answered}" for said, answered in pairs)


def topics(count: int, filler: int) -> list[tuple[str, str]]:
    return [(f"Tell me about garden topic {i}. " + "Soil and light. " * filler,
             f"Garden topic {i} is about this. " + "Compost helps. " * filler)
            for i in range(count)]


def test_tool_trail_over_budget_is_summarised_before_the_next_call(start_tree: Any) -> None:
    """A long tool result is replaced by a summary the model wrote; the client sees a thinking
    status and the summary call's tokens in the turn's total."""
    provider = Uncalibrated([calls(PLAN_CALL, prompt=100, completion=10),
                             answer(SUMMARY, 60, 6), answer("Saved your plan.", 120, 4)])
    tree = start_tree(provider, llm=WINDOW)
    tree.chat("please remember my plan")
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("status", 4),
                             ("message", 5), ("done", 6)]
    assert frames[3] == {"type": "status", "seq": 4, "stage": "thinking",
                         "exchange_id": exchange}
    assert frames[4]["metrics"] == {"tokens_total": 300, "tools": {"memory": 1},
                                    "response_time_s": 0.0, "prompt_tokens": 280,
                                    "completion_tokens": 20}
    first, compact, last = provider.requests
    assert raw_estimate(first) <= LIMIT
    assert compact == ChatRequest(system="", messages=(msgspec.structs.replace(
        first.messages[0], cuts=(), content=PROMPTS.render(
            "compact_trail", user_text="please remember my plan",
            trail=f"[1] memory {PLAN_ARGS}\n-> remembered plan: {PLAN.strip()}")),))
    assert prompt(last).endswith(
        "# Your work on this message so far\n\n"
        f"[1] Summary of your earlier work on this message:\n{SUMMARY}"
    )
    assert PLAN.strip() not in prompt(last)
    ((before, after, used, summary, turn),) = tree.rows(
        "SELECT tokens_before, tokens_after, tokens_used, summary, turn_id FROM compactions "
        "WHERE stage = 'trail'")
    assert before > LIMIT >= after == raw_estimate(last)
    assert (used, summary, turn) == (66, SUMMARY, exchange)
    assert tree.rows("SELECT llm_calls, tokens_total FROM turns") == [(3, 300)]
    assert tree.rows("SELECT name, result FROM tool_calls") == [
        ("memory", f"remembered plan: {PLAN.strip()}")  # the full record is still stored
    ]


def test_compaction_call_is_bounded_by_the_request_timeout(start_tree: Any) -> None:
    """Every LLM call of a turn, compaction included, gets at most llm.request_timeout_s."""
    provider = Uncalibrated([calls(PLAN_CALL), answer(SUMMARY), answer("Saved your plan.")])
    tree = start_tree(provider, llm={**WINDOW, "request_timeout_s": 30.0})
    tree.chat("please remember my plan")
    tree.outbox.wait_for_type("done")
    assert provider.timeouts == [30.0, 30.0, 30.0]


def test_a_history_over_its_budget_keeps_its_newest_lines_without_compacting(
    start_tree: Any,
) -> None:
    """When the conversation no longer fits its share of the prompt, its oldest lines are left
    out whole (recall can still find them) and the model is asked at once, with no compaction."""
    provider = Uncalibrated([answer("Start with the compost.", 90, 5)])
    tree = start_tree(provider, llm=WINDOW)
    said = seed_history(tree, topics(4, 15))
    tree.chat("what should I do first?")
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4)]
    # The turn's one request; after the turn is stored, the backstop may already be asking for a
    # checkpoint of the stored history (it has no answer scripted, so it stores none).
    request = provider.requests[0]
    assert raw_estimate(request) <= LIMIT
    history = prompt(request).split("# Conversation so far\n\n")[1].split("\n\n# ")[0]
    assert "Garden topic 3 is about this." in history  # the newest answer is kept
    assert "garden topic 0" not in history  # the oldest lines are not
    # Lines go whole: the history is the conversation's end from the start of one of its lines.
    assert said.endswith(history.rstrip("\n"))
    assert history.startswith(("Person: ", "You: "))
    assert tree.rows("SELECT count(*) FROM compactions") == [(0,)]
    assert tree.rows("SELECT count(*) FROM checkpoints") == [(0,)]


def test_trail_summary_that_is_not_enough_restarts_the_loop_at_step_one(start_tree: Any) -> None:
    """With history and trail both large, the trail is summarised first; when that is not
    enough the loop restarts from a checkpoint and its next tool call is step 1 again."""
    name = ScriptCall("memory", {"action": "remember", "key": "name", "value": "Ada"})
    long_summary = SUMMARY + " She wants it done before the weekend. " * 28  # about 1170 chars
    provider = Uncalibrated([calls(PLAN_CALL), answer(long_summary), answer(STATE),
                             calls(name), answer("Saved your plan and your name.")])
    tree = start_tree(provider, llm=WINDOW)
    seed_history(tree, topics(4, 4))
    tree.chat("please remember my plan")
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert [(f["type"], f.get("stage", f.get("step"))) for f in frames] == [
        ("status", "processing"), ("status", "retrieving_memory"), ("act_narration", 1),
        ("status", "thinking"), ("status", "thinking"), ("act_narration", 1), ("message", None),
        ("done", None),
    ]
    first, compact, checkpoint, restarted, last = provider.requests
    assert raw_estimate(first) <= LIMIT
    assert prompt(compact).startswith("You are compacting the working notes")
    assert prompt(checkpoint).startswith('You are writing the "Current State"')
    assert f"[1] Summary of your earlier work on this message:\n{long_summary.strip()}" in (
        prompt(checkpoint))
    assert prompt(restarted).endswith(f"[1] {RESTARTED}")
    assert f"# Current State\n\n{STATE}" in prompt(restarted)
    assert prompt(last).endswith(f"[1] {RESTARTED}\n\n[2] memory "
                                 '{"action":"remember","key":"name","value":"Ada"}\n'
                                 "-> remembered name: Ada")
    assert tree.rows("SELECT stage, turn_id FROM compactions ORDER BY id") == [
        ("trail", exchange), ("restart", exchange)
    ]
    assert tree.rows("SELECT iteration, name FROM tool_calls ORDER BY position") == [
        (1, "memory"), (1, "memory")
    ]
    assert tree.rows("SELECT iterations, llm_calls FROM turns WHERE id = ?", exchange) == [(1, 5)]
    assert tree.rows("SELECT key FROM knowledge ORDER BY key") == [("name",), ("plan",)]


def test_history_too_big_after_a_turn_is_checkpointed_by_the_backstop(start_tree: Any) -> None:
    """A long answer that leaves the next prompt over budget is checkpointed right after the
    turn is stored, so the next chat starts from a short Current State."""
    essay = "Your plan has three parts and each one matters. " * 30  # 1470 chars
    recap = "Ada asked about her plan and got a long explanation of its three parts."
    provider = Uncalibrated([answer(essay, 100, 300), answer(recap, 300, 20),
                             answer("Start with part one.", 80, 5)])
    tree = start_tree(provider, llm=WINDOW)
    tree.chat("explain my plan")
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4)]
    assert raw_estimate(provider.requests[0]) <= LIMIT
    tree.settle()  # the backstop's checkpoint is stored before the next chat reads it
    assert prompt(provider.requests[1]) == PROMPTS.render(
        "checkpoint", state="(none)", history=f"Person: explain my plan\nYou: {essay.strip()}",
        user_text="", trail="(nothing yet)")
    assert tree.rows("SELECT text, upto_transcript_id, turn_id FROM checkpoints") == [
        (recap, 2, exchange)
    ]
    ((stage, before, after, used, turn),) = tree.rows(
        "SELECT stage, tokens_before, tokens_after, tokens_used, turn_id FROM compactions")
    assert (stage, used, turn) == ("backstop", 320, exchange)
    assert before > LIMIT >= after
    assert tree.rows("SELECT tokens_total FROM turns") == [(400,)]  # not the backstop's tokens
    tree.chat("where do I start?")
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames[4:]) == [("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    next_prompt = prompt(provider.requests[2])
    assert f"# Current State\n\n{recap}\n\n" in next_prompt
    assert "# Conversation so far\n\n(none since)\n\n" in next_prompt
    assert essay.strip() not in next_prompt


def memory_of(request: ChatRequest) -> list[str]:
    """The lines of a request's memory section."""
    section = prompt(request).split("# What you remember that may matter here\n\n")[1]
    return section.split("\n\n# ")[0].splitlines()


def test_a_trail_takes_room_from_recalled_memory_before_it_is_summarised(
    start_tree: Any,
) -> None:
    """A tool result that would not fit beside the recalled memory takes the room of memory
    lines (which ones: tests/act/test_loop.py): the model is asked again at once, with no
    summarising call, the trail whole, what is left of memory as it was."""
    provider = Uncalibrated([calls(PLAN_CALL), answer("Saved your plan.")])
    tree = start_tree(provider, llm={"context_window": 1600}, act={"history_turns": 1})
    seed_history(tree, [(f"The plumber came on day {i} about the leak under bed {i}.",
                         f"Noted: day {i}, bed {i}.") for i in range(40)])
    tree.chat("please remember my plan for the plumber and the leak")
    frames = tree.outbox.wait_for_type("done")
    assert frames[-2]["blocks"] == [{"type": "text", "text": "Saved your plan."}]
    first, last = provider.requests  # no compaction call between them
    recalled, kept = memory_of(first), memory_of(last)
    freed = (len("\n".join(recalled)) - len("\n".join(kept))) // 4
    limit = 1280  # llm.context_window * act.compaction_threshold
    assert raw_estimate(first) <= limit >= raw_estimate(last)
    assert raw_estimate(last) + freed > limit  # with all the memory it would not have fitted
    assert kept[0] == "On 2020-09-13:"
    assert any(line.startswith("- The plumber came") for line in kept)
    left = iter(recalled)
    assert all(line in left for line in kept)  # in their order, unchanged
    assert len(kept) < len(recalled)
    assert prompt(last).endswith(f"-> remembered plan: {PLAN.strip()}")
    assert tree.rows("SELECT count(*) FROM compactions") == [(0,)]
