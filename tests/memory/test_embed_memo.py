"""The embedder that remembers its last vectors (chalie.memory.embed_memo): a turn's question,
embedded for recall, is not embedded again when its message is indexed."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from chalie.memory.embed_memo import Remembering
from chalie.memory.embedders import EmbedError, HashedEmbedder


class Counting:
    """The hashed embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self._inner = HashedEmbedder()
        self.kind, self.space, self.origin = "counting", "counting-space", "a test"
        self.binary_knn, self.in_process = True, True
        self.asked: list[str] = []
        self.fail = False

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        if self.fail:
            raise EmbedError("down")
        self.asked += texts
        return self._inner.embed(texts, timeout_s=timeout_s)

    def close(self) -> None:
        pass


def test_a_text_embedded_once_is_not_embedded_again() -> None:
    inner = Counting()
    memo = Remembering(inner)
    (question,) = memo.embed(["where did I park?"], timeout_s=1.0)
    batch = memo.embed(["where did I park?", "on level 3"], timeout_s=1.0)
    assert batch == [question, HashedEmbedder().embed(["on level 3"], timeout_s=1.0)[0]]
    assert inner.asked == ["where did I park?", "on level 3"]
    assert memo.reused == 1
    assert (memo.kind, memo.space, memo.binary_knn) == ("counting", "counting-space", True)


def test_the_same_text_twice_in_a_batch_is_embedded_once() -> None:
    inner = Counting()
    vectors = Remembering(inner).embed(["ok", "ok", "thanks"], timeout_s=1.0)
    assert inner.asked == ["ok", "thanks"]
    assert vectors[0] == vectors[1] != vectors[2]


def test_only_the_newest_texts_are_kept() -> None:
    inner = Counting()
    memo = Remembering(inner, kept=2)
    memo.embed(["a"], timeout_s=1.0)
    memo.embed(["b"], timeout_s=1.0)
    memo.embed(["a"], timeout_s=1.0)  # used again: the newest now
    memo.embed(["c"], timeout_s=1.0)  # "b" goes
    memo.embed(["a", "b"], timeout_s=1.0)
    assert inner.asked == ["a", "b", "c", "b"]


def test_a_failure_is_the_callers_and_nothing_is_remembered() -> None:
    inner = Counting()
    memo = Remembering(inner)
    inner.fail = True
    with pytest.raises(EmbedError):
        memo.embed(["x"], timeout_s=1.0)
    inner.fail = False
    memo.embed(["x"], timeout_s=1.0)
    assert inner.asked == ["x"]


def test_threads_embedding_at_once_get_their_own_vectors() -> None:
    memo = Remembering(Counting(), kept=8)
    expected = {f"text {i}": HashedEmbedder().embed([f"text {i}"], timeout_s=1.0)[0]
                for i in range(40)}
    wrong: list[str] = []

    def work(offset: int) -> None:
        for n in range(200):
            text = f"text {(n * 7 + offset) % 40}"
            if memo.embed([text], timeout_s=1.0) != [expected[text]]:
                wrong.append(text)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []

