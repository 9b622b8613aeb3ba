"""The Encoder's candidate search (chalie.memory.updates.for_lines) on a real store: the facts
nearest to the person's lines, by their stored vectors when the lines are embedded already."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw
import pytest

from chalie.config import Config
from chalie.memory import updates
from chalie.store import db, memory_writes
from chalie.store.effects import RememberFact
from chalie.values.memory import Kind, knowledge_text
from tests.tools.test_memory_updates import TopicEmbedder


class Counting(TopicEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        self.texts += texts
        return super().embed(texts, timeout_s=timeout_s)


@pytest.fixture
def config(make_config: Any) -> Config:
    built: Config = make_config()
    return built


def test_the_facts_nearest_the_lines_reusing_the_vectors_of_lines_embedded_already(
    writer: apsw.Connection,
) -> None:
    embedder = Counting()
    with db.immediate(writer):
        space = memory_writes.ensure_space(writer, TopicEmbedder.space, now=1.0)
        facts = [("home", "Lisbon"), ("pet", "a dog called Rex"), ("job", "engineer at Acme")]
        ids = [memory_writes.remember(writer, RememberFact(k, v), turn_id=None, now=1.0)
               for k, v in facts]
        vectors = embedder.embed([knowledge_text(k, v) for k, v in facts], timeout_s=1.0)
        memory_writes.store_vectors(writer, space, embedder.kind, Kind.KNOWLEDGE,
                                    [(i, v) for i, v in zip(ids, vectors, strict=True)
                                     if i is not None], upto_id=3, now=1.0)
        said = memory_writes.add_transcript(writer, "main", None, role="user",
                                            text="We moved to Porto", at=2.0)
        (line_vector,) = embedder.embed(["We moved to Porto"], timeout_s=1.0)
        memory_writes.store_vectors(writer, space, embedder.kind, Kind.TRANSCRIPT,
                                    [(said, line_vector)], upto_id=said, now=2.0)
    embedder.texts.clear()
    found = updates.for_lines(writer, [(said, "We moved to Porto"),
                                       (said + 1, "Rex chewed my new shoes")],
                              embedder=embedder, space_id=space, limit=12,
                              min_similarity=0.2, timeout_s=1.0)
    assert [(f.key, f.value) for f in found] == [("home", "Lisbon"), ("pet", "a dog called Rex")]
    assert embedder.texts == ["Rex chewed my new shoes"]  # the stored line is not embedded again
    assert updates.for_lines(writer, [(said, "We moved to Porto")], embedder=embedder,
                             space_id=space, limit=0, min_similarity=0.2, timeout_s=1.0) == []
