"""The work an actor hands off so its mailbox never blocks: LLM calls and tool calls on a
bounded pool. A job's result comes back to the actor as a message.

Every LLM call is counted for its path (user, dmn, scheduled, goal, encoder) and charged to the
spending governor, which pauses a background path that used its daily budget.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import structlog

from chalie.actors.turn_messages import LlmFailed
from chalie.background.governor import Governor
from chalie.errors import LlmError
from chalie.llm.types import ChatRequest, ChatResponse, LlmProvider, TextSink
from chalie.metrics import Metrics

log = structlog.get_logger("chalie.work")


class Work:
    def __init__(self, pool: Executor, provider: LlmProvider, metrics: Metrics, *,
                 path: str = "user", governor: Governor | None = None,
                 light: LlmProvider | None = None) -> None:
        """`provider`: the path's model; `light`: the light job's, for compaction and plans."""
        self._pool = pool
        self._provider = provider
        self._light = light or provider
        self.metrics = metrics
        self.path = path
        self._governor = governor

    def pinned(self, *, light: bool = False) -> Work:
        """This Work with its models as they are now (chalie/llm/route.py, Job.pinned): a turn
        keeps the models it started with when the settings change them meanwhile. `light`:
        the light job's model makes every call (a turn for the `chalie-light` model)."""
        pinned = copy.copy(self)
        for name in ("_provider", "_light"):
            pin = getattr(getattr(self, name), "pinned", None)
            if pin is not None:
                setattr(pinned, name, pin())
        if light:
            pinned._provider = pinned._light
        return pinned

    def call_llm(self, request: ChatRequest, timeout: float, *, light: bool = False,
                 on_text: TextSink | None = None) -> ChatResponse:
        """On a worker thread: one LLM call, counted in the metrics and charged to the path.
        `light`: the light job's model answers; `on_text` gets the answer as it streams."""
        m = self.metrics
        provider = self._light if light else self._provider
        try:
            response = provider.complete(request, timeout_s=timeout, on_text=on_text)
        except LlmError:
            m.llm_calls.labels(result="error").inc()
            raise
        usage = response.usage
        m.llm_calls.labels(result="ok").inc()
        m.llm_tokens.labels(kind="prompt").inc(usage.prompt_tokens)
        m.llm_tokens.labels(kind="completion").inc(usage.completion_tokens)
        m.path_llm_calls.labels(path=self.path).inc()
        m.path_tokens.labels(path=self.path).inc(usage.total_tokens)
        if self._governor is not None:
            self._governor.charge(self.path, usage.total_tokens)
        log.info("llm_answered", path=self.path, tool_calls=len(response.tool_calls),
                 tokens=usage.total_tokens, latency_s=round(response.latency_s, 4))
        return response

    def submit(self, job: Callable[[], Any], *, turn_id: str,
               reply: Callable[[Any], None]) -> None:
        """Run `job` on the pool with the caller's log context and `reply` with its result.
        An LlmError (or a bug) in the job replies LlmFailed, which ends the turn with an error."""
        context = structlog.contextvars.get_contextvars()

        def run() -> None:
            with structlog.contextvars.bound_contextvars(**context):
                try:
                    result = job()
                except LlmError as e:
                    log.warning("llm_failed", error=str(e), recoverable=e.recoverable)
                    result = LlmFailed(turn_id, str(e), e.recoverable)
                except Exception as e:
                    log.exception("worker_job_failed")
                    result = LlmFailed(turn_id, f"internal error: {e!r}", True)
                reply(result)

        self._pool.submit(run)
