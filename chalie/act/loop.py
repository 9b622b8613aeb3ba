"""One turn's ACT loop as plain state: build the request, absorb the answer, record tools.

The Session actor drives it: `request()` -> LLM -> `absorb()` -> for each call, run it and
`record()` -> `request()` again, until `absorb()` returns an Answer. The loop knows no threads
and no clocks; the driver enforces the wall-clock budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from chalie.act.prompts import Prompts
from chalie.llm.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec
from chalie.store.effects import Effect
from chalie.store.queries import HistoryLine

REPEAT_LIMIT = 3  # the same call this many times in a row ends the loop


class ToolRecord(msgspec.Struct, frozen=True):
    iteration: int
    call: ToolCall
    result: str
    is_error: bool
    duration_ms: float
    effects: tuple[Effect, ...] = ()


class Answer(msgspec.Struct, frozen=True):
    text: str


class Calls(msgspec.Struct, frozen=True):
    """Tool calls to run now, in order. Empty: ask the model again (its answer is forced)."""

    calls: tuple[ToolCall, ...]


Step = Answer | Calls


class TurnMetrics(msgspec.Struct, frozen=True):
    tokens_total: int
    tools: dict[str, int]
    llm_calls: int
    iterations: int


class ActLoop:
    def __init__(
        self,
        *,
        prompts: Prompts,
        user_text: str,
        history: Sequence[HistoryLine],
        tools: tuple[ToolSpec, ...],
        max_iterations: int,
        max_result_chars: int,
        now_text: str,
    ) -> None:
        self._prompts = prompts
        self._user_text = user_text
        self._history = tuple(history)
        self._tools = tools
        self._max_iterations = max_iterations
        self._max_result_chars = max_result_chars
        self._system = prompts.render("act_system", now=now_text)
        self.iteration = 0
        self.trail: list[ToolRecord] = []
        self.tokens_total = 0
        self.llm_calls = 0
        self.tool_counts: Counter[str] = Counter()
        self._forced = False

    @property
    def answer_forced(self) -> bool:
        """True when the next request offers no tools and asks for the final answer."""
        return self._forced or self.iteration >= self._max_iterations

    def request(self) -> ChatRequest:
        trail = self._render_trail()
        if self.answer_forced:
            trail = f"{trail}\n\n{self._prompts.render('act_final')}"
        user = self._prompts.render(
            "act_user",
            history=self._render_history(),
            user_text=self._user_text,
            trail=trail,
        )
        tools = () if self.answer_forced else self._tools
        return ChatRequest(system=self._system, messages=(Message("user", user),), tools=tools)

    def absorb(self, response: ChatResponse) -> Step:
        self.llm_calls += 1
        self.tokens_total += response.usage.total_tokens
        if not response.tool_calls or self.answer_forced:
            return Answer(response.text.strip())
        self.iteration += 1
        runnable: list[ToolCall] = []
        for call in response.tool_calls:
            if self._would_repeat(call, runnable):
                self._forced = True
                break
            runnable.append(call)
        return Calls(tuple(runnable))

    def record(self, call: ToolCall, result: str, *, is_error: bool, duration_ms: float,
               effects: tuple[Effect, ...] = ()) -> ToolRecord:
        self.tool_counts[call.name] += 1
        if len(result) > self._max_result_chars:
            result = result[: self._max_result_chars] + " …(truncated)"
        record = ToolRecord(self.iteration, call, result, is_error, duration_ms, effects)
        self.trail.append(record)
        return record

    def pending_effects(self) -> tuple[Effect, ...]:
        return tuple(e for r in self.trail for e in r.effects)

    def metrics(self) -> TurnMetrics:
        return TurnMetrics(
            tokens_total=self.tokens_total,
            tools=dict(self.tool_counts),
            llm_calls=self.llm_calls,
            iterations=self.iteration,
        )

    def _would_repeat(self, call: ToolCall, queued: list[ToolCall]) -> bool:
        recent = [r.call for r in self.trail] + queued
        tail = recent[-(REPEAT_LIMIT - 1):]
        return len(tail) == REPEAT_LIMIT - 1 and all(
            c.name == call.name and c.raw_args == call.raw_args for c in tail
        )

    def _render_history(self) -> str:
        if not self._history:
            return "(this is the start of the conversation)"
        who = {"user": "Person", "assistant": "You"}
        return "\n".join(f"{who.get(h.role, h.role)}: {h.text}" for h in self._history)

    def _render_trail(self) -> str:
        if not self.trail:
            return "(nothing yet)"
        blocks = []
        for n, r in enumerate(self.trail, 1):
            blocks.append(f"[{n}] {r.call.name} {r.call.raw_args or '{}'}\n-> {r.result}")
        return "\n\n".join(blocks)
