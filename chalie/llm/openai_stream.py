"""Reading an OpenAI-compatible answer, whole or streamed, into one assembled shape.

A whole answer (`chat.completion`) and a streamed one (`chat.completion.chunk` events) carry
the same things in different cuts: text, a reasoning model's thinking, tool calls, usage and
the finish reason. Both end up as an `Assembled`, so the provider builds its ChatResponse in
one place and a streamed answer equals the same answer sent whole.

Thinking is kept out of the text wherever a server puts it: DeepSeek's `reasoning_content`,
OpenRouter's and Ollama's `reasoning`, or a leading `<think>...</think>` block in the content
itself (deepseek-r1 and qwen3 served by Ollama or llama.cpp). While streaming, text inside
that block is held back, so the person never sees the model think aloud.
"""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.errors import LlmBadResponse, LlmHttpError
from chalie.llm.types import TextSink, Usage

# --- the wire ------------------------------------------------------------------------------------


class WireFunction(msgspec.Struct):
    name: str | None = None
    # a string of JSON, in pieces while streaming; older Ollama sends an object
    arguments: str | dict[str, Any] | None = None


class WireToolCall(msgspec.Struct):
    index: int | None = None  # streamed fragments of one call share an index
    id: str | None = None
    function: WireFunction | None = None


class WireMessage(msgspec.Struct):
    """A whole answer's `message`, or a chunk's `delta`: the same fields, whole or in pieces."""

    content: str | None = None
    reasoning_content: str | None = None  # DeepSeek, vLLM's reasoning parsers
    reasoning: str | None = None  # OpenRouter, Ollama
    tool_calls: list[WireToolCall] | None = None


class WirePromptDetails(msgspec.Struct):
    cached_tokens: int | None = None  # OpenAI, vLLM, llama.cpp: read from the prefix cache


class WireUsage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: WirePromptDetails | None = None

    def to_usage(self) -> Usage:
        prompt, completion = self.prompt_tokens or 0, self.completion_tokens or 0
        total = self.total_tokens if self.total_tokens is not None else prompt + completion
        details = self.prompt_tokens_details
        cached = (details.cached_tokens or 0) if details is not None else 0
        return Usage(prompt, completion, total, cached_tokens=cached)


class _Choice(msgspec.Struct):
    message: WireMessage | None = None
    delta: WireMessage | None = None
    finish_reason: str | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: WireUsage | None = None
    error: Any = None  # some gateways answer 200 with an error body


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = msgspec.field(default_factory=list)
    usage: WireUsage | None = None
    error: Any = None


_decode_completion = msgspec.json.Decoder(_Completion).decode
_decode_chunk = msgspec.json.Decoder(_Chunk).decode


class Assembled(msgspec.Struct):
    """An answer as read off the wire, before the provider parses tool arguments or estimates
    missing usage. `calls` hold (id, name, arguments) as the server sent them."""

    text: str
    reasoning: str
    calls: list[tuple[str, str, str | dict[str, Any] | None]]
    finish_reason: str | None
    usage: Usage | None


# --- errors --------------------------------------------------------------------------------------


def error_detail(value: Any) -> str | None:
    """The human message in a decoded error body: OpenAI, vLLM and OpenRouter send
    {"error": {"message": ...}}, Ollama and llama.cpp {"error": "..."} (or the OpenAI shape),
    older vLLM {"object": "error", "message": ...}, FastAPI-style servers {"detail": "..."}."""
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    for key in ("message", "detail"):
        if isinstance(value.get(key), str):
            return str(value[key])
    return None


def _error_status(error: Any) -> int:
    """An error event's HTTP-like status: its `code` when that is one (vLLM sends 400 etc.),
    else 500, since the server failed after it had already answered 200."""
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    return 500


def _error_in_body(error: Any, raw: str) -> LlmHttpError:
    return LlmHttpError(_error_status(error), raw, detail=error_detail({"error": error}))


# --- thinking ------------------------------------------------------------------------------------

_OPEN, _CLOSE = "<think>", "</think>"


class ThinkSplitter:
    """Splits content that may open with a `<think>` block into answer text and reasoning,
    piece by piece. `feed` returns the text that may be shown now; text that could still turn
    out to be the start of a think block (leading blanks, a partial "<thi") is held back
    until it cannot, and `finish` returns whatever is held when the content ends."""

    def __init__(self) -> None:
        self._state = "start"  # start -> think -> answer, or start -> answer
        self._buf = ""
        self._scanned = 0  # how much of a think block has been searched for its end
        self._strip = False  # drop the blanks between </think> and the answer
        self.reasoning = ""

    def feed(self, piece: str) -> str:
        if self._state == "answer":
            return self._answer(piece)
        self._buf += piece
        if self._state == "start":
            head = self._buf.lstrip()
            if not head or (len(head) < len(_OPEN) and _OPEN.startswith(head)):
                return ""
            if not head.startswith(_OPEN):
                self._state = "answer"
                text, self._buf = self._buf, ""
                return text
            self._state = "think"
            self._buf = head[len(_OPEN):]
        end = self._buf.find(_CLOSE, self._scanned)
        if end < 0:
            self._scanned = max(0, len(self._buf) - len(_CLOSE) + 1)
            return ""
        self.reasoning = self._buf[:end].strip()
        rest, self._buf = self._buf[end + len(_CLOSE):], ""
        self._state, self._strip = "answer", True
        return self._answer(rest)

    def finish(self) -> str:
        """The text still held back; an unclosed think block (the model was cut off while
        thinking) is all reasoning, and the answer is empty."""
        held, self._buf = self._buf, ""
        if self._state == "think":
            self.reasoning = held.strip()
            return ""
        return held if self._state == "start" else ""

    def _answer(self, piece: str) -> str:
        if self._strip:
            piece = piece.lstrip()
            if not piece:
                return ""
            self._strip = False
        return piece


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


# --- a whole answer ------------------------------------------------------------------------------


def whole_answer(content: bytes) -> Assembled:
    """A non-streamed chat completion; LlmBadResponse when it is not one."""
    try:
        completion = _decode_completion(content)
    except msgspec.DecodeError as e:
        raise LlmBadResponse(f"the answer is not a chat completion ({e})") from e
    if completion.error is not None:
        raise _error_in_body(completion.error, content.decode("utf-8", "replace"))
    if not completion.choices:
        raise LlmBadResponse("the answer has no choices")
    choice = completion.choices[0]
    message = choice.message or WireMessage()
    think = ThinkSplitter()
    text = think.feed(message.content or "") + think.finish()
    calls = [(tc.id or "", (tc.function or WireFunction()).name or "",
              (tc.function or WireFunction()).arguments) for tc in message.tool_calls or ()]
    return Assembled(
        text=text,
        reasoning=_join(message.reasoning_content or message.reasoning or "", think.reasoning),
        calls=calls,
        finish_reason=choice.finish_reason,
        usage=completion.usage.to_usage() if completion.usage is not None else None,
    )


# --- a streamed answer ---------------------------------------------------------------------------


class _PartialCall:
    __slots__ = ("args", "args_object", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []
        self.args_object: dict[str, Any] | None = None


class StreamAssembler:
    """Collects the `data` of a chat-completion event stream. Text goes to `on_text` as it
    comes (never reasoning, never tool arguments); tool calls are put together from their
    fragments by `index`; a `usage` chunk (sent last, with empty choices, when the request asked
    for `stream_options.include_usage`) is kept. `done` turns True at `data: [DONE]`."""

    def __init__(self, on_text: TextSink) -> None:
        self._on_text = on_text
        self._think = ThinkSplitter()
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self.events = 0
        self.done = False

    @property
    def finished(self) -> bool:
        """Whether the server said the answer is over ([DONE] or a finish reason); a stream
        that ends before either broke off."""
        return self.done or self._finish is not None

    def feed(self, data: str) -> None:
        self.events += 1
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = _decode_chunk(data)
        except msgspec.DecodeError as e:
            raise LlmBadResponse(f"a stream event is not a chat completion chunk ({e})") from e
        if chunk.error is not None:
            raise _error_in_body(chunk.error, data)
        if chunk.usage is not None:
            self._usage = chunk.usage.to_usage()
        if not chunk.choices:
            return
        choice = chunk.choices[0]
        delta = choice.delta or choice.message or WireMessage()
        if delta.content:
            self._emit(self._think.feed(delta.content))
        thought = delta.reasoning_content or delta.reasoning
        if thought:
            self._reasoning.append(thought)
        for fragment in delta.tool_calls or ():
            self._merge(fragment)
        if choice.finish_reason == "error":  # OpenRouter: a provider failed mid-answer
            raise LlmHttpError(500, data, detail="the server ended the stream with an error")
        if choice.finish_reason:
            self._finish = choice.finish_reason

    def result(self) -> Assembled:
        self._emit(self._think.finish())
        calls = []
        for key in sorted(self._calls):
            call = self._calls[key]
            args: str | dict[str, Any] | None = (
                call.args_object if call.args_object is not None else "".join(call.args))
            calls.append((call.id, call.name, args))
        return Assembled(
            text="".join(self._text),
            reasoning=_join("".join(self._reasoning), self._think.reasoning),
            calls=calls,
            finish_reason=self._finish,
            usage=self._usage,
        )

    def _emit(self, text: str) -> None:
        if text:
            self._text.append(text)
            self._on_text(text)

    def _merge(self, fragment: WireToolCall) -> None:
        slot = self._slot(fragment)
        if fragment.id:
            slot.id = fragment.id
        function = fragment.function
        if function is None:
            return
        if function.name:
            slot.name = function.name
        if isinstance(function.arguments, dict):
            slot.args_object = function.arguments
        elif function.arguments:
            slot.args.append(function.arguments)

    def _slot(self, fragment: WireToolCall) -> _PartialCall:
        """The call a fragment belongs to: by its index; a server that sends no index gives a
        new call a new id, and a continuation neither."""
        key = fragment.index
        if key is None:
            known = {c.id: k for k, c in self._calls.items() if c.id}
            if fragment.id and fragment.id in known:
                key = known[fragment.id]
            elif fragment.id or not self._calls:
                key = max(self._calls, default=-1) + 1
            else:
                key = max(self._calls)
        return self._calls.setdefault(key, _PartialCall())
