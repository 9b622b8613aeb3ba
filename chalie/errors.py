"""Chalie's exceptions.

    ChalieError
     ├─ ConfigError          bad or unknown configuration key; start-up exits with code 2
     ├─ PromptError          a prompt file is missing or has an unknown placeholder
     ├─ StoreError           the database could not be opened or migrated
     │   └─ StoreConflict    a write found the store changed under it (a goal cancelled, a
     │                       scheduled run stored already): its transaction is rolled back
     ├─ LlmError             an LLM request failed; `recoverable` says whether a retry may work
     │   ├─ LlmUnavailable   could not connect, or the request timed out
     │   ├─ LlmHttpError     the server answered with an HTTP error status
     │   └─ LlmBadResponse   the answer was not a chat completion we can read
     │       └─ StructuredOutputError  the answer was not JSON of the schema the request asked for
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
    """The LLM server answered with an error status."""

    def __init__(self, status: int, body: str) -> None:
        # 4xx other than 408/429 means the request or the credentials are wrong: retrying the
        # same turn will not help until the configuration changes.
        transient = status in (408, 429) or status >= 500
        super().__init__(f"LLM server answered HTTP {status}: {body[:200]}", recoverable=transient)
        self.status = status


class LlmBadResponse(LlmError):
    """The LLM server's answer was not a readable chat completion."""


class StructuredOutputError(LlmBadResponse):
    """A reply that had to be JSON of a given schema was not; the message says where."""


class EmbedError(ChalieError):
    """Texts could not be embedded. Recall goes on with full-text search alone."""
