"""Tools given in the prompt, for a model without native tool calling (`tools = false`).

`PromptedTools` wraps the endpoint's provider: the request's tools go into the system prompt
(prompts/tools_in_prompt.md) instead of the request, and the calls the model writes as text are
read back as tool calls by chalie/llm/repair.py's `normalise`. While the answer streams,
`_CallGate` holds back text that starts like a call, so the person never sees a call's JSON.
"""

from __future__ import annotations

import msgspec

from chalie.llm.repair import normalise
from chalie.llm.types import ChatRequest, ChatResponse, LlmProvider, TextSink
from chalie.prompts import Prompts

# An answer that starts like this may be a call, so it is not streamed to the person (the
# openings of the call formats chalie/llm/repair.py reads out of text).
_CALL_STARTS = ("{", "[", "```", "<tool_call>", "[TOOL_CALLS]")


class PromptedTools:
    """An LlmProvider for a model without native tool calling (`tools = false`): the request's
    tools go into the system prompt, and the calls the model writes as text come back as tool
    calls.

    While the answer streams, text that starts like a call is held back (the person should never
    see a call's JSON); any other answer streams as it arrives. The response's text is always
    the whole answer, less the calls."""

    def __init__(self, inner: LlmProvider, prompts: Prompts) -> None:
        self._inner = inner
        self._prompts = prompts

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        if not request.tools:
            return self._inner.complete(request, timeout_s=timeout_s, on_text=on_text)
        tools = "\n".join(
            msgspec.json.encode({"name": t.name, "description": t.description,
                                 "parameters": t.parameters}).decode()
            for t in request.tools
        )
        system = self._prompts.render("tools_in_prompt", tools=tools, system=request.system)
        prompted = msgspec.structs.replace(request, system=system, tools=())
        gate = None if on_text is None else _CallGate(on_text)
        response = self._inner.complete(prompted, timeout_s=timeout_s, on_text=gate)
        return normalise(response, request)

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        return self._inner.models(timeout_s=timeout_s)

    def close(self) -> None:
        self._inner.close()


class _CallGate:
    """Passes streamed text on once it is clearly not a call; holds back one that may be."""

    def __init__(self, sink: TextSink) -> None:
        self._sink = sink
        self._head = ""  # what arrived while undecided
        self._state = "undecided"  # -> "open" (streaming) or "held" (a possible call)

    def __call__(self, piece: str) -> None:
        if self._state == "open":
            self._sink(piece)
            return
        if self._state == "held":
            return
        self._head += piece
        start = self._head.lstrip()
        if not start:
            return
        if any(start.startswith(s) for s in _CALL_STARTS):
            self._state = "held"
        elif not any(s.startswith(start) for s in _CALL_STARTS):  # could still become one
            self._state = "open"
            self._sink(self._head)
            self._head = ""
