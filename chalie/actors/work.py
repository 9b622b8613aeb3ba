"""The work a Session hands off so its mailbox never blocks: LLM calls and tool calls on the
shared bounded pool. A job's result comes back to the actor as a message."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import structlog

from chalie.actors.messages import LlmFailed
from chalie.errors import LlmError
from chalie.llm.types import ChatRequest, ChatResponse, LlmProvider
from chalie.metrics import Metrics

log = structlog.get_logger("chalie.session")


class Work:
    def __init__(self, pool: Executor, provider: LlmProvider, metrics: Metrics) -> None:
        self._pool = pool
        self._provider = provider
        self._metrics = metrics

    def call_llm(self, request: ChatRequest, timeout: float) -> ChatResponse:
        """On a worker thread: one LLM call, counted in the metrics."""
        m = self._metrics
        try:
            response = self._provider.complete(request, timeout_s=timeout)
        except LlmError:
            m.llm_calls.labels(result="error").inc()
            raise
        m.llm_calls.labels(result="ok").inc()
        m.llm_tokens.labels(kind="prompt").inc(response.usage.prompt_tokens)
        m.llm_tokens.labels(kind="completion").inc(response.usage.completion_tokens)
        log.info("llm_answered", tool_calls=len(response.tool_calls),
                 tokens=response.usage.total_tokens, latency_s=round(response.latency_s, 4))
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
