"""A deterministic provider that replays scripted steps: for tests and offline demos.

A script file is JSON: {"steps": [STEP, ...], "loop": false}. A STEP is one LLM answer:
    {"text": "..."}                                         a plain answer
    {"tool_calls": [{"name": "memory", "args": {...}}]}     ask for tools ("raw_args": "..." to
                                                            send arguments verbatim)
    {"fail": "why"}                                         the request fails (recoverable)
Any step may carry "usage": {"prompt_tokens": P, "completion_tokens": C}; without it the usage is
estimated from the text. A structured request (one with a `response_format`) is answered with
the step's text like any other: the script holds the JSON the model would have sent. When the
steps run out the script starts again if "loop" is true, and otherwise every further request
fails with a clear error.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import msgspec

from chalie.errors import ConfigError, LlmBadResponse, LlmUnavailable
from chalie.llm.types import (
    ChatRequest,
    ChatResponse,
    TextSink,
    ToolCall,
    Usage,
    estimate_tokens,
    parse_tool_arguments,
)


class ScriptCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    args: dict[str, Any] | None = None
    raw_args: str | None = None


class ScriptUsage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    prompt_tokens: int
    completion_tokens: int


class ScriptStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str = ""
    tool_calls: tuple[ScriptCall, ...] = ()
    usage: ScriptUsage | None = None
    fail: str | None = None


class Script(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    steps: tuple[ScriptStep, ...]
    loop: bool = False


def load_script(path: str) -> Script:
    try:
        return msgspec.json.decode(Path(path).read_bytes(), type=Script)
    except FileNotFoundError:
        raise ConfigError("llm.script", f"file not found: {path}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ConfigError("llm.script", f"{path} is not a valid script: {e}") from None


class ScriptedProvider:
    """Answers each request with the next step; records every request it saw."""

    def __init__(self, steps: tuple[ScriptStep, ...] | list[ScriptStep], *, loop: bool = False):
        self._steps = tuple(steps)
        self._loop = loop
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[ChatRequest] = []

    @classmethod
    def from_file(cls, path: str) -> ScriptedProvider:
        script = load_script(path)
        return cls(script.steps, loop=script.loop)

    def close(self) -> None:
        pass

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        return ("script",)

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        with self._lock:
            self.requests.append(request)
            if self._next >= len(self._steps):
                if not self._loop or not self._steps:
                    raise LlmBadResponse(f"the script's {len(self._steps)} steps are used up")
                self._next = 0
            step = self._steps[self._next]
            self._next += 1
        if step.fail is not None:
            raise LlmUnavailable(step.fail)
        calls = []
        for i, c in enumerate(step.tool_calls):
            if c.raw_args is not None:
                args, error = parse_tool_arguments(c.raw_args)
                raw = c.raw_args
            else:
                args, error = dict(c.args or {}), None
                raw = msgspec.json.encode(args).decode()
            calls.append(ToolCall(f"call_{i}", c.name, args, raw, error))
        if step.usage is not None:
            p, c2 = step.usage.prompt_tokens, step.usage.completion_tokens
            usage = Usage(p, c2, p + c2)
        else:
            p = estimate_tokens(request.system) + sum(
                estimate_tokens(m.content) for m in request.messages
            )
            c2 = estimate_tokens(step.text) + sum(estimate_tokens(c.raw_args) for c in calls)
            usage = Usage(p, c2, p + c2, estimated=True)
        if on_text is not None and step.text and request.response_format is None:
            for piece in re.findall(r"\S+\s*|\s+", step.text):  # streamed a word at a time
                on_text(piece)
        return ChatResponse(
            text=step.text,
            tool_calls=tuple(calls),
            usage=usage,
            finish_reason="tool_calls" if calls else "stop",
            latency_s=0.0,
        )
