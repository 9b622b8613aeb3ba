"""The ACT loop as plain state: what each LLM request holds and what each answer leads to."""

from __future__ import annotations

import itertools
from typing import Any

from chalie.act.loop import ActLoop, Answer, Calls, TurnMetrics
from chalie.llm.types import ChatRequest, ChatResponse, ToolCall, ToolSpec, Usage
from chalie.prompts import Prompts
from chalie.store.effects import RememberFact
from chalie.store.queries import HistoryLine
from chalie.values.memory import MemoryLine, memory_text

PROMPTS = Prompts.load()
FINAL = PROMPTS.render("act_final")
MEMORY = ToolSpec("memory", "facts", {"type": "object"})
CLOCK = ToolSpec("clock", "time", {"type": "object"})
RECALL = '{"action":"recall","query":"pet"}'


def make_loop(**options: Any) -> ActLoop:
    settings: dict[str, Any] = {
        "prompts": PROMPTS, "user_text": "What is my pet called?", "history": (),
        "tools": (MEMORY, CLOCK), "max_iterations": 3, "max_result_chars": 100,
        "now_text": "2024-05-01 10:00 UTC",
    }
    settings.update(options)
    return ActLoop(**settings)


def tool_call(name: str = "memory", raw: str = RECALL, call_id: str = "call_0") -> ToolCall:
    return ToolCall(call_id, name, {}, raw)


def reply(text: str = "", *calls: ToolCall, tokens: int = 10) -> ChatResponse:
    return ChatResponse(text, calls, Usage(tokens - 1, 1, tokens), "stop", 0.1)


def user_message(request: ChatRequest) -> str:
    (message,) = request.messages
    assert message.role == "user"
    return message.content


def run_tools(loop: ActLoop, step: Any, result: str = "no facts") -> None:
    assert isinstance(step, Calls)
    for c in step.calls:
        loop.record(c, result, is_error=False, duration_ms=1.0)


# --- the request ----------------------------------------------------------------------------------

def test_first_request_holds_history_message_and_empty_trail() -> None:
    """The model gets the system prompt and one user message with history, message and trail."""
    history = [HistoryLine("user", "I got a dog", 1.0), HistoryLine("assistant", "Nice!", 2.0)]
    request = make_loop(history=history).request()
    assert request.system == PROMPTS.render("act_system",
                                            identity="(nothing known about them yet)")
    assert request.tools == (MEMORY, CLOCK)
    assert user_message(request) == PROMPTS.render(
        "act_user", now="2024-05-01 10:00 UTC", state="(none yet)", situation="",
        world="(nothing reported)", memory="(nothing relevant stored)",
        history="Person: I got a dog\nYou: Nice!",
        user_text="What is my pet called?", trail="(nothing yet)",
    )


def sections(text: str) -> list[str]:
    return [line[2:] for line in text.split("\n") if line.startswith("# ")]


def turn_request(n: int) -> ChatRequest:
    """Turn n's first request: n exchanges of history, and every volatile part new."""
    history = [HistoryLine("assistant" if i % 2 else "user", f"line {i}", float(i), id=i)
               for i in range(2 * n)]
    loop = make_loop(history=history, now_text=f"2024-05-01 10:{n:02d} UTC")
    loop.use_context(identity="Their name is Sam.", state="They asked about dogs.",
                     situation=f"How the conversation stands: turn {n}.",
                     memory=f"- recalled for turn {n}", history=history,
                     tools=(MEMORY, CLOCK), world=f"signal {n}")
    return loop.request()


def test_what_changes_least_comes_first_and_the_time_is_not_in_the_system_prompt() -> None:
    """Tools, then the system prompt with who the person is, then the Current State (it changes
    only when the history starts anew) and the history, then the time, where the conversation
    stands, memory, world state, message and trail."""
    request = turn_request(2)
    assert "10:02" not in request.system
    assert request.system.endswith("# Who you are talking to\n\nTheir name is Sam.")
    text = user_message(request)
    assert sections(text) == [
        "Current State", "Conversation so far", "The time now", "Where the conversation stands",
        "What you remember that may matter here", "What other programs report (world state)",
        "The person's message", "Your work on this message so far"]
    assert text.startswith("# Current State\n\nThey asked about dogs.\n\n# Conversation")
    assert "10:02 UTC\n\n# Where the conversation stands\n\nHow the conversation stands: " \
        "turn 2.\n\n# What you" in text


def test_a_turn_repeats_the_previous_turns_request_up_to_the_end_of_its_history() -> None:
    """The next turn's first request has the same tools and system prompt, and its user message
    starts with everything the previous one had up to the end of that one's history."""
    before, after = turn_request(2), turn_request(3)
    assert (after.tools, after.system) == (before.tools, before.system)
    (earlier,), (later,) = before.messages, after.messages
    stable = earlier.content[:earlier.cuts[-1]]
    assert stable.endswith("Person: line 2\nYou: line 3")
    assert later.content.startswith(stable)
    assert earlier.cuts[-1] in later.cuts  # where the earlier breakpoint was, a block ends now


def test_the_message_is_cut_after_each_history_line_and_at_the_history_end() -> None:
    """Message.cuts: one piece per history line (the heading with the first), each starting
    with the newline before it, then the rest: the pieces of the last turn stay pieces."""
    (message,) = turn_request(2).messages
    bounds = (0, *message.cuts, len(message.content))
    pieces = [message.content[a:b] for a, b in itertools.pairwise(bounds)]
    assert pieces[:4] == [
        "# Current State\n\nThey asked about dogs.\n\n# Conversation so far\n\nPerson: line 0",
        "\nYou: line 1", "\nPerson: line 2", "\nYou: line 3"]
    assert pieces[4].startswith("\n\n# The time now\n\n2024-05-01 10:02 UTC")
    assert "".join(pieces) == message.content


def test_no_situation_leaves_nothing_after_the_time() -> None:
    """Without a situation there is no section for it: the time is followed by memory."""
    loop = make_loop()
    loop.use_context(identity="", state="They asked about dogs.", memory="", history=(),
                     tools=(MEMORY,))
    text = user_message(loop.request())
    assert "Where the conversation stands" not in text
    assert "UTC\n\n# What you remember" in text


def test_empty_history_says_the_conversation_starts() -> None:
    """With no past turns the history section says this is the start."""
    assert "(this is the start of the conversation)" in user_message(make_loop().request())


def test_tool_results_appear_in_the_next_request() -> None:
    """After a call is recorded, the next request shows the call and its result in the trail."""
    loop = make_loop()
    step = loop.absorb(reply("", tool_call()))
    assert step == Calls((tool_call(),))
    run_tools(loop, step, "- pet: Rex")
    text = user_message(loop.request())
    assert f"[1] memory {RECALL}\n-> - pet: Rex" in text
    assert "(nothing yet)" not in text
    assert FINAL not in text


def test_plain_answer_ends_the_loop_with_its_text() -> None:
    """An answer without tool calls is the final answer, stripped of surrounding space."""
    loop = make_loop()
    assert loop.absorb(reply("  Rex.\n")) == Answer("Rex.")
    assert loop.metrics() == TurnMetrics(tokens_total=10, tools={}, llm_calls=1, iterations=0,
                                         prompt_tokens=9, completion_tokens=1)


# --- the iteration cap ----------------------------------------------------------------------------

def test_tools_are_offered_until_the_iteration_cap_then_a_final_answer_is_asked() -> None:
    """After max_iterations tool-asking answers the request has no tools and asks to answer."""
    loop = make_loop(max_iterations=2)
    for n in range(2):
        request = loop.request()
        assert request.tools == (MEMORY, CLOCK)
        assert loop.answer_forced is False
        run_tools(loop, loop.absorb(reply("", tool_call(raw=f'{{"n":{n}}}'))))
    final_request = loop.request()
    assert loop.answer_forced is True
    assert final_request.tools == ()
    assert user_message(final_request).endswith(FINAL)


def test_tool_call_after_the_cap_is_taken_as_the_answer() -> None:
    """A model that still asks for a tool when told to answer has its text taken as the answer."""
    loop = make_loop(max_iterations=1)
    run_tools(loop, loop.absorb(reply("", tool_call())))
    step = loop.absorb(reply("Probably Rex.", tool_call(raw='{"other":1}')))
    assert step == Answer("Probably Rex.")
    assert loop.iteration == 1
    assert loop.metrics().llm_calls == 2


# --- repeated calls -------------------------------------------------------------------------------

def test_same_call_a_third_time_in_a_row_is_not_run_and_forces_the_answer() -> None:
    """The third identical call (same name and arguments) is dropped and tools are withdrawn."""
    loop = make_loop(max_iterations=10)
    for _ in range(2):
        run_tools(loop, loop.absorb(reply("", tool_call())))
    assert loop.answer_forced is False
    assert loop.absorb(reply("", tool_call())) == Calls(())
    assert loop.answer_forced is True
    request = loop.request()
    assert request.tools == ()
    assert FINAL in user_message(request)
    assert loop.tool_counts == {"memory": 2}


def test_repeat_within_one_answer_keeps_the_first_two() -> None:
    """An answer asking the same call three times runs it twice and then forces the answer."""
    loop = make_loop()
    calls = [tool_call(call_id=f"call_{i}") for i in range(3)]
    step = loop.absorb(reply("", *calls))
    assert step == Calls(tuple(calls[:2]))
    assert loop.answer_forced is True
    run_tools(loop, step)
    loop.request()
    assert [(r.call.call_id, r.ran) for r in loop.records] == [
        ("call_0", True), ("call_1", True), ("call_2", False)]
    assert "not run: the same call ran 2 times in a row already" in loop.records[2].result


def test_same_name_with_other_arguments_is_not_a_repeat() -> None:
    """Calls that differ in arguments, or are interrupted by another call, all run."""
    loop = make_loop(max_iterations=10)
    for raw in (RECALL, RECALL, '{"action":"recall","query":"dog"}', RECALL, RECALL):
        step = loop.absorb(reply("", tool_call(raw=raw)))
        assert step == Calls((tool_call(raw=raw),))
        run_tools(loop, step)
    assert loop.answer_forced is False
    assert loop.tool_counts == {"memory": 5}


# --- accounting -----------------------------------------------------------------------------------

def test_tokens_and_tool_counts_add_up_over_the_turn() -> None:
    """Tokens are summed over every answer and tools are counted by name."""
    loop = make_loop()
    step = loop.absorb(reply("", tool_call(), tool_call("clock", "{}", "call_1"), tokens=100))
    run_tools(loop, step)
    run_tools(loop, loop.absorb(reply("", tool_call(raw="{}"), tokens=50)))
    loop.absorb(reply("Rex.", tokens=7))
    assert loop.tokens_total == 157
    assert loop.metrics() == TurnMetrics(
        tokens_total=157, tools={"memory": 2, "clock": 1}, llm_calls=3, iterations=2,
        prompt_tokens=154, completion_tokens=3,
    )


def test_long_tool_results_are_truncated_in_the_trail() -> None:
    """A result longer than max_result_chars keeps its start and says it was cut."""
    loop = make_loop(max_result_chars=10)
    loop.absorb(reply("", tool_call()))
    record = loop.record(tool_call(), "abcdefghijKLMNOP", is_error=False, duration_ms=2.0)
    short = loop.record(tool_call(), "abcdefghij", is_error=True, duration_ms=1.0)
    assert record.result == "abcdefghij …(truncated)"
    assert short.result == "abcdefghij"
    assert (record.iteration, short.is_error) == (1, True)
    assert "-> abcdefghij …(truncated)" in user_message(loop.request())


def test_pending_effects_are_collected_in_call_order() -> None:
    """Effects asked for by recorded calls come back in the order the calls ran."""
    loop = make_loop()
    assert loop.pending_effects() == ()
    loop.absorb(reply("", tool_call()))
    facts = [RememberFact("pet", "Rex"), RememberFact("city", "Lyon"), RememberFact("pet", "Fido")]
    loop.record(tool_call(), "ok", is_error=False, duration_ms=1.0, effects=tuple(facts[:2]))
    loop.record(tool_call(), "no effect", is_error=False, duration_ms=1.0)
    loop.record(tool_call(), "ok", is_error=False, duration_ms=1.0, effects=tuple(facts[2:]))
    assert loop.pending_effects() == tuple(facts)


def test_memory_gives_room_back_from_its_end_sparing_its_best_lines() -> None:
    """yield_memory drops memory lines from the end of the section (what comes before stays the
    same for a prefix cache), sparing the best (those the turn reinforces) until no other is
    left, at least a quarter of the section's room at the start of the turn however little is
    asked; with no lines left (or none given) it gives nothing."""
    # 20 lines of 41 characters with their breaks; scores a permutation: the 8 lowest, not among
    # the best 12, are on lines 0, 1, 3, 6, 9, 12, 15 and 18.
    lines = tuple(MemoryLine(f"On 2024-04-{1 + n // 4:02d}:", f"- said {n:02d} " + "y" * 30,
                             (n * 7 % 20) / 20, best=n * 7 % 20 >= 8) for n in range(20))
    loop = make_loop()
    loop.use_context(identity="", state="", memory=lines, history=(), tools=(MEMORY,))

    def said() -> list[int]:
        text = user_message(loop.request())
        return [n for n in range(20) if f"- said {n:02d} " in text]

    assert said() == list(range(20))
    assert loop.yield_memory(1) == 5  # a quarter: 5 lines of 41 characters
    assert said() == [0, 1, 2, 3, 4, 5, 7, 8, 10, 11, 13, 14, 16, 17, 19]
    assert memory_text(tuple(lines[n] for n in said())) in user_message(loop.request())
    assert loop.yield_memory(1) == 5  # the last 3 others, then the 2 least relevant best
    assert said() == [2, 5, 8, 10, 11, 13, 14, 16, 17, 19]
    assert loop.yield_memory(103) == 10  # more than the whole section is left
    assert (said(), loop.yield_memory(1)) == ([], 0)
    assert "# What you remember that may matter here\n\n(nothing relevant stored)" in \
        user_message(loop.request())
    seeded = make_loop(memory="- a recalled line")
    assert seeded.yield_memory(100) == 0
    assert "- a recalled line" in user_message(seeded.request())
