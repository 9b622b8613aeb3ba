"""A light model that can never write the episode JSON: the Encoder backs off instead of trying
on every turn. Over 60 turns a minute apart it makes 12 calls (6 tries of 2), not 120, none of
them while a turn runs, and /health's list names the job and why."""

from __future__ import annotations

import logging
import threading
from typing import Any

from chalie.llm.types import ChatRequest, ChatResponse, TextSink, Usage
from tests.actors.conftest import Tree
from tests.actors.test_encoder import counter, events, every_n, quiet

TURNS = 60
MINUTE = 60.0


class CannotWriteJson:
    """An LLM that answers the person, and answers every structured request with prose."""

    def __init__(self) -> None:
        self.structured = 0
        self.plain = 0
        self._lock = threading.Lock()

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        with self._lock:
            if request.response_format is not None:
                self.structured += 1
                text = "Sure! The two of them talked about a trip."
            else:
                self.plain += 1
                text = "Noted."
        return ChatResponse(text=text, tool_calls=(), usage=Usage(100, 10, 110),
                            finish_reason="stop", latency_s=0.0)

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        return ("stub",)

    def close(self) -> None:
        pass


def turn(tree: Tree, n: int) -> None:
    tree.chat(f"message number {n}")
    tree.outbox.wait_for_type("done", n + 1)
    quiet(tree)


def test_sixty_turns_cost_a_few_structured_calls_and_none_during_a_turn(
    start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """Each turn adds a window; the first turn's window fails (two calls); after that the turns
    themselves start no structured call, and the retries (after 1, 2, 4, 8, 16 minutes) come
    from the Encoder's own timer: 12 calls in all, with one warning that it backs off."""
    provider = CannotWriteJson()
    tree = start_tree(provider, encoder=True, memory=every_n(2))
    during_turns: list[int] = []
    tries_at: list[int] = []
    for n in range(TURNS):
        before = provider.structured
        turn(tree, n)
        during_turns.append(provider.structured - before)
        before = provider.structured
        tree.clock.advance(MINUTE)
        quiet(tree)
        if provider.structured > before:
            tries_at.append(n + 1)  # minutes since the first turn
    assert provider.plain == TURNS
    assert during_turns == [2] + [0] * (TURNS - 1)
    assert tries_at == [1, 3, 7, 15, 31]
    assert provider.structured == 12  # without the backoff: 2 a turn, 120
    # every turn after the first was nudged in vain
    assert counter(tree.metrics, "chalie_background_skipped_total", job="encoder") == TURNS - 1
    assert len(events(log_records, "background_backoff", logging.WARNING)) == 1
    assert len(events(log_records, "encoding_skipped", logging.WARNING)) == 1  # the rest: info
    assert len(events(log_records, "encoding_skipped", logging.INFO)) == 5
    assert tree.backoff is not None
    (failing,) = tree.backoff.describe()
    assert failing["job"] == "encoder"
    assert failing["channel"] == "main"
    assert failing["state"] == "backing_off"
    assert failing["failures"] == 6
    assert failing["error"].startswith("the light model cannot write the episode JSON: ")
    assert failing["retry_at"] == tree.clock.time() - (TURNS - 31) * MINUTE + 32 * MINUTE


def test_an_encoder_that_finds_its_channel_waiting_tries_again_when_the_wait_ends(
    start_tree: Any,
) -> None:
    """A wait the Encoder did not start itself (it was restarted since) still ends in a try of
    its own: the nudge is skipped, and once the wait is over the window is sent."""
    provider = CannotWriteJson()
    tree = start_tree(provider, encoder=True, memory=every_n(2))
    assert tree.backoff is not None
    tree.backoff.failed("encoder", "main", "the light model cannot write the episode JSON: x")
    turn(tree, 0)
    assert provider.structured == 0
    tree.clock.advance(MINUTE)
    quiet(tree)
    assert provider.structured == 2
    (failing,) = tree.backoff.describe()
    assert failing["failures"] == 2
