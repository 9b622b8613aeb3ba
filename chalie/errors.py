"""Chalie's exceptions.

    ChalieError
     ├─ ConfigError          bad or unknown configuration key; start-up exits with code 2
     ├─ PromptError          a prompt file is missing or has an unknown placeholder
     ├─ StoreError           the database could not be opened or migrated
     │   └─ StoreConflict    a write found the store changed under it (a goal cancelled, a
     │                       scheduled run stored already): its transaction is rolled back
     ├─ LlmError             an LLM request failed; `recoverable` says whether a retry may work
     │   ├─ LlmUnavailable   could not connect, or the request timed out
     │   ├─ LlmHttpError     the server answered with an HTTP error status (`kind` classes it)
     │   ├─ LlmBadResponse   the answer was not a chat completion we can read
     │   │   └─ StructuredOutputError  the answer was not JSON of the schema the request asked for
     │   └─ LlmJobFailed     every model of a job failed; says what to change (chalie/llm/route.py)
     ├─ EmbedError           texts could not be embedded (server down, bad answer, no extra)
     └─ InterfaceError       a paired interface failed a call or answered outside the contract
                             (defined in chalie/interfaces/errors.py, beside its checks)

Tool failures are not exceptions: a tool returns an error result that goes back to the model.
"""

from __future__ import annotations


class ChalieError(Exception):
    """Base of every error Chalie raises on purpose."""


class ConfigError(ChalieError):
    """A configuration key is unknown or holds a value of the wrong type."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"config error: {key}: {problem}")
        self.key = key
        self.problem = problem


class PromptError(ChalieError):
    """A prompt file is missing or cannot be rendered."""


class StoreError(ChalieError):
    """The store could not be opened or migrated."""


class StoreConflict(StoreError):
    """A write found the store not as it expected; the transaction (or the turn's savepoint)
    that holds it is rolled back, and nothing of it is stored."""


class LlmError(ChalieError):
    """An LLM request failed."""

    recoverable: bool = True

    def __init__(self, message: str, *, recoverable: bool | None = None) -> None:
        super().__init__(message)
        if recoverable is not None:
            self.recoverable = recoverable


class LlmUnavailable(LlmError):
    """The LLM server could not be reached, or did not answer in time."""


class LlmHttpError(LlmError):
    """The LLM server answered with an error status.

    `kind` classes it: "auth" (401/403: the key), "not_found" (404: the model or the path),
    "context" (the prompt is longer than the model takes), "rate_limited" (429; `retry_after_s`
    is the server's Retry-After, if it sent one), "server" (408, 5xx), "client" (any other
    4xx: the request or the settings are wrong, and retrying will not help). `detail` is the
    server's own message, taken from its error body where it has the usual shape."""

    def __init__(self, status: int, body: str, *, retry_after_s: float | None = None,
                 detail: str | None = None) -> None:
        self.status = status
        self.body = body
        self.retry_after_s = retry_after_s
        self.detail = (detail if detail is not None else body).strip()[:300]
        self.kind = _http_kind(status, self.detail)
        super().__init__(f"HTTP {status}: {self.detail or '(no body)'}",
                         recoverable=self.kind in ("rate_limited", "server"))


_CONTEXT_WORDS = ("context length", "context size", "context_length", "context window",
                  "maximum context", "too many tokens", "prompt is too long", "too long",
                  "exceeds the context")


def _http_kind(status: int, detail: str) -> str:
    lowered = detail.lower()
    if status == 429:
        return "rate_limited"
    if status == 408 or status >= 500:
        return "server"
    if status in (401, 403):
        return "auth"
    if status in (400, 413) and any(w in lowered for w in _CONTEXT_WORDS):
        return "context"
    if status == 404 or (status == 400 and "model" in lowered and (
            "not found" in lowered or "does not exist" in lowered or "unknown" in lowered)):
        return "not_found"
    return "client"


class LlmBadResponse(LlmError):
    """The LLM server's answer was not a readable chat completion."""


class StructuredOutputError(LlmBadResponse):
    """A reply that had to be JSON of a given schema was not; the message says where."""


class LlmJobFailed(LlmError):
    """Every model of a job (its own, then its fallback) failed one request. The message is for
    the person: which provider, the address it tried, what went wrong and the setting to
    change. `cause` is the first model's error."""

    def __init__(self, message: str, cause: LlmError) -> None:
        super().__init__(message, recoverable=cause.recoverable)
        self.cause = cause


class EmbedError(ChalieError):
    """Texts could not be embedded. Recall goes on with full-text search alone."""
