"""How big a prompt is, in tokens, and whether it still fits the context window.

Counts come from the provider's reported usage where it gave one: each answer's prompt_tokens
calibrates the ratio between the real count and a 4-characters-a-token estimate, and later
estimates are scaled by it. With no usage reported, the plain estimate is used.
"""

from __future__ import annotations

import msgspec

from chalie.llm.types import ChatRequest, Usage
from chalie.values.memory import MemoryLine

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

    def excess(self, request: ChatRequest) -> int:
        """By how many estimated tokens (before the ratio) `request` is over the limit."""
        return max(0, raw_estimate(request) - int(self.limit / self._ratio))

    def calibrate(self, request: ChatRequest, usage: Usage) -> None:
        """Learn from the provider's count of a prompt we estimated."""
        if usage.estimated or usage.prompt_tokens <= 0:
            return
        estimate = raw_estimate(request)
        if estimate > 0:
            self._ratio = min(4.0, max(0.25, usage.prompt_tokens / estimate))


def line_tokens(lines: tuple[MemoryLine, ...]) -> int:
    """What memory lines take of a prompt, estimated as raw_estimate counts (each with its line
    break; their days' headings not counted)."""
    return (sum(len(line.text) + 1 for line in lines) + 3) // 4


def shed(lines: tuple[MemoryLine, ...], tokens: int) -> tuple[MemoryLine, ...]:
    """`lines` (in the order they were said) less enough of them to free at least `tokens`
    (estimated): the last ones first, so that the section's start, and everything before it in
    the request, stays as it was and a model server's prefix cache keeps it; but the best lines
    (MemoryLine.best) go only once no other is left, the least relevant of them first. A day's
    heading goes with its last line (its room is not counted)."""
    order = [n for n in reversed(range(len(lines))) if not lines[n].best] \
        + sorted((n for n in range(len(lines)) if lines[n].best), key=lambda n: lines[n].score)
    dropped: set[int] = set()
    chars = 0
    for n in order:
        if chars >= 4 * tokens:
            break
        dropped.add(n)
        chars += len(lines[n].text) + 1
    return tuple(line for n, line in enumerate(lines) if n not in dropped)
