"""The ACT loop between requests: steering, skipped calls, notes, seeding and compaction."""

from __future__ import annotations

from chalie.act.loop import MAX_RESTARTS, ActLoop, Calls, Note, SteeringNote, TurnMetrics
from chalie.llm.types import ChatRequest, Message
from chalie.store.effects import RememberFact
from chalie.store.queries import HistoryLine
from tests.act.test_loop import (
    CLOCK,
    FINAL,
    MEMORY,
    PROMPTS,
    RECALL,
    make_loop,
    reply,
    run_tools,
    tool_call,
    user_message,
)

STEERING = "MID-TURN STEERING from the person, sent while you were working"
SKIPPED = "the person sent new instructions first"
SUMMARY = "Summary of your earlier work on this message:\n"
RESTARTED = ("(The loop restarted after compaction: your earlier work on this message is "
             "summarised in Current State.)")
HISTORY = (HistoryLine("user", "I got a dog", 1.0), HistoryLine("assistant", "Nice!", 2.0))


def force_by_repeat(loop: ActLoop) -> None:
    """Run the same recall twice, then ask for it a third time so the loop forces the answer."""
    for _ in range(2):
        run_tools(loop, loop.absorb(reply("", tool_call())), "- pet: Rex")
    assert loop.absorb(reply("", tool_call())) == Calls(())


# --- steering -------------------------------------------------------------------------------------

def test_steering_shows_in_the_next_request_after_the_tool_results() -> None:
    """Words sent mid-turn appear in the next request's trail, marked as steering, and are kept."""
    loop = make_loop()
    run_tools(loop, loop.absorb(reply("", tool_call())), "- pet: Rex")
    loop.steer("I meant my cat, not my dog")
    text = user_message(loop.request())
    assert f"[1] memory {RECALL}\n-> - pet: Rex\n\n[2] {STEERING}" in text
    assert text.endswith("takes precedence over the message above:\nI meant my cat, not my dog")
    assert loop.steering == [SteeringNote("I meant my cat, not my dog", 1)]


def test_steering_gives_tools_back_after_a_repeat_forced_the_answer() -> None:
    """After a repeated call withdrew the tools, new steering offers them again."""
    loop = make_loop(max_iterations=10)
    force_by_repeat(loop)
    assert loop.answer_forced is True
    loop.steer("Look up my cat instead")
    request = loop.request()
    assert loop.answer_forced is False
    assert request.tools == (MEMORY, CLOCK)
    assert FINAL not in user_message(request)


def test_steering_after_the_iteration_cap_still_asks_for_the_answer() -> None:
    """Steering does not lift the iteration cap: the request stays tool-free and asks to answer."""
    loop = make_loop(max_iterations=1)
    run_tools(loop, loop.absorb(reply("", tool_call())))
    loop.steer("Also check the time")
    request = loop.request()
    assert loop.answer_forced is True
    assert request.tools == ()
    assert user_message(request).endswith(f"Also check the time\n\n{FINAL}")


# --- skipped calls, notes and side calls ----------------------------------------------------------

def test_a_skipped_call_tells_the_model_why_and_is_not_counted() -> None:
    """A call that did not run shows "not run: <reason>" in the trail and no tool count."""
    loop = make_loop()
    loop.absorb(reply("", tool_call()))
    skipped = loop.skip(tool_call(), "steered")
    assert (skipped.result, skipped.ran, skipped.is_error) == (f"not run: {SKIPPED}", False, True)
    assert loop.records == [skipped]
    assert f"[1] memory {RECALL}\n-> not run: {SKIPPED}" in user_message(loop.request())
    assert loop.tool_counts == {}
    assert loop.metrics().tools == {}


def test_skipped_calls_do_not_count_toward_the_repeat_rule() -> None:
    """Only calls that ran count as repeats: run, skip, run, then the fourth ask is refused."""
    loop = make_loop(max_iterations=10)
    run_tools(loop, loop.absorb(reply("", tool_call())))
    loop.skip(tool_call(), "steered")
    step = loop.absorb(reply("", tool_call()))
    assert step == Calls((tool_call(),))
    assert loop.answer_forced is False
    run_tools(loop, step)
    assert loop.absorb(reply("", tool_call())) == Calls(())
    assert loop.answer_forced is True
    assert loop.tool_counts == {"memory": 2}


def test_a_loop_note_appears_in_the_trail() -> None:
    """A note the loop adds (such as a dropped draft) is shown to the model as a trail item."""
    loop = make_loop()
    loop.note("draft_dropped", text="Rex.")
    text = user_message(loop.request())
    assert text.endswith("[1] Your draft answer before the steering (not sent): Rex.")


def test_counting_a_side_call_adds_tokens_but_no_iteration() -> None:
    """An LLM call outside the loop counts its tokens and the call, and tools stay offered."""
    loop = make_loop(max_iterations=1)
    loop.count(reply("A summary.", tokens=30))
    assert loop.metrics() == TurnMetrics(tokens_total=30, tools={}, llm_calls=1, iterations=0,
                                         prompt_tokens=29, completion_tokens=1)
    assert loop.request().tools == (MEMORY, CLOCK)


# --- what the request starts from -----------------------------------------------------------------

def test_seeded_memory_appears_under_what_you_remember() -> None:
    """Facts seeded before the first call are shown in the memory section of the request."""
    loop = make_loop()
    loop.seed_memory("- pet: Rex")
    assert "# What you remember that may matter here\n\n- pet: Rex\n\n# What other programs" in (
        user_message(loop.request())
    )


def test_state_is_shown_and_empty_history_then_says_none_since() -> None:
    """With a Current State and no later history the request shows the state and "(none since)"."""
    text = user_message(make_loop(state="The person has a dog named Rex.").request())
    assert "# Current State\n\nThe person has a dog named Rex.\n\n# Conversation so far" in text
    assert "# Conversation so far\n\n(none since)\n\n# The time now" in text


# --- compaction stage 1: the trail summary --------------------------------------------------------

def test_trail_summary_request_asks_to_summarise_the_trail_without_tools() -> None:
    """Stage 1 sends the compact_trail prompt with the message and the trail, and no tools."""
    loop = make_loop()
    run_tools(loop, loop.absorb(reply("", tool_call())), "- pet: Rex")
    expected = PROMPTS.render("compact_trail", user_text="What is my pet called?",
                              trail=f"[1] memory {RECALL}\n-> - pet: Rex")
    assert loop.trail_summary_request() == ChatRequest(
        system="", messages=(Message("user", expected),), tools=()
    )


def test_summary_replaces_the_covered_trail_and_steering_sent_meanwhile_stays() -> None:
    """The summarised calls become one note; steering that arrived during compaction follows it."""
    loop = make_loop(max_iterations=10)
    run_tools(loop, loop.absorb(reply("", tool_call(), tool_call("clock", "{}", "call_1"))))
    loop.trail_summary_request()
    loop.steer("And my cat?")
    loop.apply_trail_summary("Recalled pets: Rex. Checked the clock.")
    assert loop.trail == [Note(f"{SUMMARY}Recalled pets: Rex. Checked the clock."),
                          SteeringNote("And my cat?", 1)]
    text = user_message(loop.request())
    assert f"[1] {SUMMARY}Recalled pets: Rex. Checked the clock.\n\n[2] {STEERING}" in text
    assert "-> no facts" not in text


def test_only_a_trail_with_work_beyond_a_summary_can_be_summarised() -> None:
    """An empty trail or one holding only the summary note cannot be summarised again."""
    loop = make_loop()
    assert loop.can_summarise_trail() is False
    run_tools(loop, loop.absorb(reply("", tool_call())))
    assert loop.can_summarise_trail() is True
    loop.trail_summary_request()
    loop.apply_trail_summary("Recalled pets: none.")
    assert loop.can_summarise_trail() is False
    loop.steer("Try my cat")
    assert loop.can_summarise_trail() is True


# --- compaction stage 2: the restart --------------------------------------------------------------

def test_checkpoint_request_covers_state_history_message_and_trail() -> None:
    """Stage 2 sends the checkpoint prompt with the history, the message and the trail."""
    loop = make_loop(history=HISTORY)
    run_tools(loop, loop.absorb(reply("", tool_call())), "- pet: Rex")
    expected = PROMPTS.render(
        "checkpoint", state="(none)", history="Person: I got a dog\nYou: Nice!",
        user_text="What is my pet called?", trail=f"[1] memory {RECALL}\n-> - pet: Rex",
    )
    request = loop.checkpoint_request()
    assert request == ChatRequest(system="", messages=(Message("user", expected),), tools=())


def test_restart_continues_from_the_checkpoint_with_tools_offered_again() -> None:
    """After a restart the state is the checkpoint, history is gone and iterations start over."""
    loop = make_loop(history=HISTORY, max_iterations=1)
    run_tools(loop, loop.absorb(reply("", tool_call())))
    assert loop.answer_forced is True
    loop.checkpoint_request()
    loop.steer("Also my cat")
    loop.restart("The person has a dog named Rex.")
    assert (loop.state, loop.history, loop.iteration, loop.restarts) == (
        "The person has a dog named Rex.", (), 0, 1
    )
    assert loop.trail == [Note(RESTARTED), SteeringNote("Also my cat", 1)]
    request = loop.request()
    assert request.tools == (MEMORY, CLOCK)
    text = user_message(request)
    assert "# Current State\n\nThe person has a dog named Rex.\n\n" in text
    assert "# Conversation so far\n\n(none since)\n\n" in text
    assert "I got a dog" not in text


def test_restarts_are_refused_after_the_maximum() -> None:
    """A turn can restart MAX_RESTARTS times; then can_restart() says no more."""
    loop = make_loop()
    for n in range(MAX_RESTARTS):
        assert loop.can_restart() is True
        loop.checkpoint_request()
        loop.restart(f"checkpoint {n}")
    assert (loop.restarts, loop.can_restart(), loop.state) == (2, False, "checkpoint 1")
    assert loop.can_summarise_trail() is False


def test_records_and_effects_survive_both_compaction_stages() -> None:
    """Summarised calls still count as records, and the facts they remembered are still stored."""
    loop = make_loop(max_iterations=10)
    facts = (RememberFact("pet", "Rex"), RememberFact("city", "Lyon"))
    for n, fact in enumerate(facts):
        call = tool_call(raw=f'{{"n":{n}}}', call_id=f"call_{n}")
        loop.absorb(reply("", call))
        loop.record(call, "ok", is_error=False, duration_ms=1.0, effects=(fact,))
    loop.trail_summary_request()
    loop.apply_trail_summary("Remembered the pet.")
    loop.checkpoint_request()
    loop.restart("Pet and city stored.")
    assert [r.call.call_id for r in loop.records] == ["call_0", "call_1"]
    assert loop.pending_effects() == facts
    assert loop.tool_counts == {"memory": 2}
