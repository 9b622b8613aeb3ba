"""A Session's cognition on its own: the silence gap that has the tail encoded, the post-turn
fan-out's order and isolation (a failing step is logged and counted, the rest still run), and
the topic job's use of the embedder's vectors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chalie.actors.encoder_messages import EncodeTail
from chalie.actors.session_cognition import ChannelCognition, TurnCognition
from chalie.actors.store_writer_messages import ApplyOps
from chalie.clock import ManualClock
from chalie.memory.context import TurnContext
from chalie.memory.embedders import HashedEmbedder
from chalie.metrics import Metrics
from chalie.store import cognition_rows, db
from chalie.store.background_ops import SaveMind, SaveTraits


@dataclass
class Told:
    """A Directory that keeps what it is told."""

    messages: list[tuple[str, Any]] = field(default_factory=list)

    def tell(self, name: str, message: Any) -> bool:
        self.messages.append((name, message))
        return True


def cognition(make_config: Any, clock: ManualClock, told: Told,
              metrics: Metrics | None = None, *, semantic: bool = False) -> ChannelCognition:
    config = make_config()
    deps = SimpleNamespace(cognition=config.cognition, directory=told, clock=clock,
                           metrics=metrics or Metrics(), timezone="UTC",
                           recall=SimpleNamespace(space_id=1, semantic=semantic),
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


@pytest.mark.parametrize(("semantic", "joins"), [(False, False), (True, True)],
                         ids=["hashed", "semantic"])
def test_the_topic_job_compares_the_vectors_of_a_semantic_embedder_only(
    make_config: Any, tmp_path: Path, semantic: bool, joins: bool,
) -> None:
    """Two questions that share only their frame are 0.67 apart in the hashed space: with the
    hashed embedder the words decide and the second starts its own topic; had the embedder meant
    them that close, it would join the first."""
    c = cognition(make_config, ManualClock(), Told(), semantic=semantic)
    hashed = HashedEmbedder()
    conn = db.open_writer(tmp_path / "topics", busy_timeout_ms=2000, synchronous="OFF")
    try:
        chosen = []
        for at, text in enumerate(("Can you tell me how to make pancakes?",
                                   "Can you tell me how to change a tyre?")):
            vector = hashed.embed_one(text)
            context = TurnContext(identity="", state="", history=(), tools=(),
                                  recalled=(), history_upto=0, tokens={}, vector=vector)
            choice = c.topic_job(text)(conn, context)
            assert choice is not None
            cognition_rows.topic_seen(conn, topic_id=choice.id, channel="main",
                                      name=choice.name, new=choice.new,
                                      keywords=choice.keywords, vector=vector, space_id=1,
                                      fok=1.0, now=float(at))
            c.mind.topic_id = choice.id
            chosen.append(choice)
    finally:
        conn.close()
    assert (chosen[1].id == chosen[0].id) is joins
    assert chosen[1].new is not joins
