"""How big a prompt is, in tokens, and whether it still fits the context window.

Counts come from the provider's reported usage where it gave one: each answer's prompt_tokens
calibrates the ratio between the real count and a 4-characters-a-token estimate, and later
estimates are scaled by it. With no usage reported, the plain estimate is used.
"""

from __future__ import annotations

import msgspec

from chalie.llm.types import ChatRequest, Usage

_encode = msgspec.json.encode


_tools_chars: tuple[object, int] = ((), 2)  # the last tool list measured, and its size


IMAGE_TOKENS = 1000  # what an image costs a vision model, roughly (OpenAI: 85-1105; Claude ~1600)


def raw_estimate(request: ChatRequest) -> int:
    global _tools_chars  # noqa: PLW0603  (a one-entry cache: every call of a turn has one list)
    tools, chars = _tools_chars
    if tools is not request.tools:
        chars = len(_encode([[t.name, t.description, t.parameters] for t in request.tools]))
        _tools_chars = (request.tools, chars)
    text = len(request.system) + sum(len(m.content) for m in request.messages) + chars
    images = sum(len(m.images) for m in request.messages) * IMAGE_TOKENS
    return (max(1, (text + 3) // 4) if text else 0) + images


class PromptBudget:
    def __init__(self, context_window: int, threshold: float, ratio: float = 1.0) -> None:
        self.limit = int(context_window * threshold)
        self._ratio = ratio

    @property
    def ratio(self) -> float:
        """Real tokens per estimated token, as learned from the provider."""
        return self._ratio

    def tokens(self, request: ChatRequest) -> int:
        return round(raw_estimate(request) * self._ratio)

    def fits(self, request: ChatRequest) -> bool:
        return self.tokens(request) <= self.limit

    def calibrate(self, request: ChatRequest, usage: Usage) -> None:
        """Learn from the provider's count of a prompt we estimated."""
        if usage.estimated or usage.prompt_tokens <= 0:
            return
        estimate = raw_estimate(request)
        if estimate > 0:
            self._ratio = min(4.0, max(0.25, usage.prompt_tokens / estimate))
