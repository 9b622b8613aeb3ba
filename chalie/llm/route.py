"""A job's models: classed retries, the fallback, and errors that say what to change.

Each job (`primary`, `light`) has one Endpoint, and maybe a fallback Endpoint: a provider with
the settings it was built from. A request goes to the job's Endpoint, which retries what may
pass (connection errors, timeouts, 5xx: exponential backoff with jitter; a 429: after the
server's Retry-After when that is within `max_retry_after_s`, else like a 5xx without one) and
nothing else (other 4xx: the key, the model or the prompt is wrong). When the Endpoint gives up,
the fallback takes the request; when both fail, LlmJobFailed says which provider, at which
address, failed how, and which setting to change. Text already streamed to the person is
never taken back: a request whose answer broke off mid-stream (dropped, or stalled for
llm.stall_timeout_s) is not retried; one that broke off before any text went out is, like a
dropped connection.

Every answer is normalised (chalie/llm/repair.py: broken tool-call JSON repaired, calls written
as text recognised) before anyone sees it. Each attempt is logged and counted by provider,
model and outcome, and each Endpoint keeps its last state for /health.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from chalie.config import LlmConfig
from chalie.errors import LlmBadResponse, LlmError, LlmHttpError, LlmJobFailed, LlmUnavailable
from chalie.llm.repair import normalise
from chalie.llm.types import ChatRequest, ChatResponse, LlmProvider, TextSink
from chalie.metrics import Metrics

log = structlog.get_logger("chalie.llm")

Sleep = Callable[[float], None]


@dataclass
class EndpointState:
    """What /health shows of one model: `unknown` until first used or checked, then `ok`,
    `unreachable`, `rate_limited` or `error` (with what went wrong)."""

    state: str = "unknown"
    error: str | None = None
    at: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "error": self.error, "at": self.at}


@dataclass
class Endpoint:
    """One configured model: its provider, settings, and where in the config they are."""

    provider: LlmProvider
    settings: LlmConfig
    job: str
    key: Callable[[str], str]  # setting name -> the config key it comes from
    fallback: bool = False
    status: EndpointState = field(default_factory=EndpointState)

    @property
    def kind(self) -> str:
        return self.settings.provider

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def address(self) -> str:
        s = self.settings
        if s.provider == "llamacpp":
            return s.model
        if s.provider == "script":
            return s.script
        return s.base_url

    def describe(self) -> dict[str, Any]:
        return {"provider": self.kind, "model": self.model, "address": self.address,
                **self.status.as_json()}

    def mark(self, state: str, error: str | None = None) -> None:
        self.status = EndpointState(state, error, time.time())

    def failed(self, error: LlmError) -> None:
        """What `error` says of this model: unreachable, rate-limited, or erroring."""
        outcome = outcome_of(error)
        self.mark(outcome if outcome in ("unreachable", "rate_limited") else "error",
                  advice(self, error))


def outcome_of(error: LlmError) -> str:
    """The `outcome` label of a failed attempt."""
    if isinstance(error, LlmHttpError):
        return {"server": "server_error", "client": "client_error"}.get(error.kind, error.kind)
    if isinstance(error, LlmUnavailable):
        return "unreachable"
    if isinstance(error, LlmBadResponse):
        return "bad_response"
    return "error"


def advice(endpoint: Endpoint, error: LlmError) -> str:
    """What went wrong with `endpoint`, for a person: the provider, the address, the setting."""
    k, where = endpoint.key, f"{endpoint.kind} at {endpoint.address}"
    model = endpoint.model
    if isinstance(error, LlmHttpError):
        said = f"HTTP {error.status}: {error.detail}" if error.detail else f"HTTP {error.status}"
        match error.kind:
            case "auth":
                return f"{where} refused the API key ({said}); set {k('api_key')}"
            case "not_found":
                return (f"{where} has no model {model!r} ({said}); set {k('model')} to one it "
                        f"serves" + (f" (or run: ollama pull {model})"
                                     if ":11434" in endpoint.address else ""))
            case "context":
                return (f"the prompt is longer than {model!r} at {endpoint.address} accepts "
                        f"({said}); set {k('context_window')} to the model's real window")
            case "rate_limited":
                wait = error.retry_after_s
                asked = f", asking to wait {wait:g}s" if wait is not None else ""
                return (f"{where} is rate-limiting requests ({said}{asked}); waits above "
                        f"{k('max_retry_after_s')} are not made")
            case "server":
                return f"{where} failed ({said})"
            case _:
                return f"{where} refused the request ({said}); check {k('model')} and " \
                       f"{k('provider')}"
    if isinstance(error, LlmUnavailable):
        if endpoint.kind == "llamacpp":
            return f"the llamacpp model {model!r} cannot run ({error}); set {k('model')}"
        if "stalled" in str(error):
            return (f"{where} stopped sending in the middle of its answer ({error}); raise "
                    f"{k('stall_timeout_s')} if the model is only slow to start")
        if "timed out" in str(error):
            return (f"{where} did not answer in time ({error}); raise "
                    f"{k('request_timeout_s')} or use a smaller model")
        return (f"{where} is unreachable ({error}); is the model server running? Set "
                f"{k('base_url')} to its address")
    if isinstance(error, LlmBadResponse):
        return (f"{where} sent an answer Chalie cannot read ({error}); is {k('base_url')} an "
                f"{endpoint.kind} API, and {k('provider')} right?")
    return f"{where}: {error}"


class Job:
    """One job's models, seen by the rest of Chalie as one LlmProvider."""

    def __init__(self, name: str, endpoints: list[Endpoint], metrics: Metrics | None = None, *,
                 sleep: Sleep = time.sleep, rng: random.Random | None = None) -> None:
        assert endpoints, "a job needs a model"
        self.name = name
        self.endpoints = endpoints
        self._metrics = metrics
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()

    # -- LlmProvider --

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        deadline = time.monotonic() + timeout_s
        streamed = _Streamed(on_text)
        candidates = [e for e in self.endpoints if e.settings.vision or not _has_images(request)]
        if not candidates:
            e = self.endpoints[0]
            raise LlmJobFailed(
                f"the {self.name} model {e.model!r} takes no images ({e.key('vision')} = "
                "false); send the message without images, or configure a model with vision",
                LlmError("no vision", recoverable=False))
        failures: list[tuple[Endpoint, LlmError]] = []
        for n, endpoint in enumerate(candidates):
            if n > 0:
                if self._metrics is not None:
                    self._metrics.llm_fallbacks.labels(job=self.name).inc()
                log.warning("llm_fallback", job=self.name, provider=endpoint.kind,
                            model=endpoint.model)
            try:
                response = self._attempts(endpoint, request, deadline, streamed)
            except LlmError as e:
                failures.append((endpoint, e))
                if streamed.any or time.monotonic() >= deadline:
                    break  # text the person saw is not taken back; no time is left
                continue
            return normalise(response, request)
        raise self._failed(failures)

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        return self.endpoints[0].provider.models(timeout_s=timeout_s)

    # -- changing models while running --

    def swap(self, endpoints: list[Endpoint]) -> list[Endpoint]:
        """Answer with `endpoints` from the next call on (settings saved while running); the
        ones it replaces, which calls already out (and turns pinned to them) still use."""
        assert endpoints, "a job needs a model"
        with self._lock:
            old, self.endpoints = self.endpoints, endpoints
        return old

    def pinned(self) -> Job:
        """This job as it is now, for one turn: a turn that started with a model finishes with
        it, whatever is swapped in meanwhile."""
        return Job(self.name, self.endpoints, self._metrics, sleep=self._sleep, rng=self._rng)

    def close(self) -> None:
        for e in self.endpoints:
            e.provider.close()

    def describe(self) -> dict[str, Any]:
        """The job's models and their last states, for /health."""
        main = self.endpoints[0].describe()
        if len(self.endpoints) > 1:
            main["fallback"] = self.endpoints[1].describe()
        return main

    # -- internals --

    def _attempts(self, endpoint: Endpoint, request: ChatRequest, deadline: float,
                  streamed: _Streamed) -> ChatResponse:
        """One endpoint's attempts at `request`: retried as its class allows."""
        s = endpoint.settings
        attempt = 0
        while True:
            started = time.monotonic()
            budget = min(deadline - started, s.request_timeout_s)
            if budget <= 0:
                raise LlmUnavailable("no time was left for the request")
            try:
                response = endpoint.provider.complete(
                    request, timeout_s=budget, on_text=streamed.sink if streamed.wanted else None)
            except LlmError as e:
                outcome = outcome_of(e)
                self._count(endpoint, outcome, attempt, time.monotonic() - started, e)
                endpoint.failed(e)
                delay = self._retry_delay(endpoint, e, attempt, streamed)
                if delay is None or time.monotonic() + delay >= deadline:
                    raise
                attempt += 1
                self._sleep(delay)
                continue
            self._count(endpoint, "ok", attempt, response.latency_s, None)
            endpoint.mark("ok")
            return response

    def _retry_delay(self, endpoint: Endpoint, error: LlmError, attempt: int,
                     streamed: _Streamed) -> float | None:
        """Seconds to wait before the next attempt, or None: do not retry this one."""
        s = endpoint.settings
        if streamed.any or attempt >= s.retries:
            return None
        backoff = s.retry_backoff_s * (2.0 ** attempt) * (0.5 + self._rng.random() / 2)
        if isinstance(error, LlmHttpError):
            if error.kind == "rate_limited":
                wait = error.retry_after_s
                if wait is None:
                    return backoff
                return wait if wait <= s.max_retry_after_s else None
            return backoff if error.kind == "server" else None
        if isinstance(error, LlmUnavailable):
            return backoff
        return None  # an unreadable answer: the same server will send the same again

    def _count(self, endpoint: Endpoint, outcome: str, attempt: int, latency: float,
               error: LlmError | None) -> None:
        if self._metrics is not None:
            self._metrics.llm_attempts.labels(provider=endpoint.kind, model=endpoint.model,
                                              outcome=outcome).inc()
        values: dict[str, Any] = {"job": self.name, "provider": endpoint.kind,
                                  "model": endpoint.model, "outcome": outcome,
                                  "attempt": attempt + 1, "latency_s": round(latency, 4)}
        if endpoint.fallback:
            values["fallback"] = True
        if error is None:
            log.info("llm_attempt", **values)
        else:
            log.warning("llm_attempt", error=str(error)[:300], **values)

    def _failed(self, failures: list[tuple[Endpoint, LlmError]]) -> LlmJobFailed:
        first, cause = failures[0]
        text = advice(first, cause)
        if len(failures) > 1:
            second, error = failures[1]
            text = f"{text}; the fallback failed too: {advice(second, error)}"
        return LlmJobFailed(f"the {self.name} model failed: {text}", cause)


class _Streamed:
    """The caller's text sink, and whether any text went out through it."""

    def __init__(self, sink: TextSink | None) -> None:
        self._sink = sink
        self.any = False

    @property
    def wanted(self) -> bool:
        return self._sink is not None

    def sink(self, text: str) -> None:
        if text and self._sink is not None:
            self.any = True
            self._sink(text)


def _has_images(request: ChatRequest) -> bool:
    return any(m.images for m in request.messages)
