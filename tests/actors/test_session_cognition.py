"""A Session's cognition on its own: the silence gap that has the tail encoded, and the post-turn
fan-out's order and isolation (a failing step is logged and counted, the rest still run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from chalie.actors.encoder_messages import EncodeTail
from chalie.actors.session_cognition import ChannelCognition, TurnCognition
from chalie.actors.store_writer_messages import ApplyOps
from chalie.clock import ManualClock
from chalie.metrics import Metrics
from chalie.store.background_ops import SaveMind, SaveTraits


@dataclass
class Told:
    """A Directory that keeps what it is told."""

    messages: list[tuple[str, Any]] = field(default_factory=list)

    def tell(self, name: str, message: Any) -> bool:
        self.messages.append((name, message))
        return True


def cognition(make_config: Any, clock: ManualClock, told: Told,
              metrics: Metrics | None = None) -> ChannelCognition:
    config = make_config()
    deps = SimpleNamespace(cognition=config.cognition, directory=told, clock=clock,
                           metrics=metrics or Metrics(), timezone="UTC",
                           recall=SimpleNamespace(space_id=1),
                           context=SimpleNamespace(recall_k=12))
    return ChannelCognition("main", deps)  # type: ignore[arg-type]


def test_a_message_after_a_long_silence_has_the_tail_encoded(make_config: Any) -> None:
    """Past cognition.silence_gap_s (2700 s) since the channel's last message, the encoder is
    told to encode what was said before; within it, nothing is."""
    clock, told = ManualClock(), Told()
    c = cognition(make_config, clock, told)
    c.message_arrived(clock.time())  # the channel's first message: nothing before it
    c.mind.last_message_at = clock.time()
    clock.advance(2700)
    c.message_arrived(clock.time())
    assert told.messages == []
    clock.advance(1)
    c.message_arrived(clock.time())
    assert told.messages == [("encoder", EncodeTail("main"))]


@pytest.mark.allow_error_logs
def test_the_fan_out_runs_in_order_and_one_failing_step_stops_nothing(
    make_config: Any,
) -> None:
    """The DMN's idle reset fails: the backstop still runs, the situation is updated, the
    failure is counted, and the Mind and traits are saved."""
    clock, told, metrics = ManualClock(), Told(), Metrics()
    c = cognition(make_config, clock, told, metrics)
    ran: list[str] = []

    def dmn_reset() -> None:
        ran.append("dmn_idle_reset")
        raise RuntimeError("the DMN is gone")

    c.fan_out(TurnCognition(), "I need to water the plants", False,
              [("dmn_idle_reset", dmn_reset), ("compaction_backstop",
                                                lambda: ran.append("compaction_backstop"))])
    assert ran == ["dmn_idle_reset", "compaction_backstop"]
    assert c.mind.situation.open_loops == ["water the plants"]
    assert c.mind.exchanges == 1
    assert metrics.fan_out_failures.labels(step="dmn_idle_reset")._value.get() == 1.0
    ((name, saved),) = told.messages
    assert name == "store_writer"
    assert isinstance(saved, ApplyOps)
    assert [type(op) for op in saved.ops] == [SaveMind, SaveTraits]
