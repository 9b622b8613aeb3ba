"""One turn's ACT loop as plain state: build the request, absorb the answer, record tools.

The Session actor drives it: `request()` -> LLM -> `absorb()` -> for each call, run it and
`record()` -> `request()` again, until `absorb()` returns an Answer. Steering and compaction
change the trail between requests. The loop knows no threads and no clocks; the driver enforces
the wall-clock budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from chalie.act.budget import line_tokens, shed
from chalie.act.history import history_text
from chalie.llm.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec
from chalie.prompts import Prompts
from chalie.store.effects import Effect
from chalie.store.queries import HistoryLine
from chalie.values.images import Image
from chalie.values.memory import MemoryLine, memory_text

REPEAT_LIMIT = 3  # the same call this many times in a row ends the loop
MAX_RESTARTS = 2  # compaction stage 2 at most this often per turn
# When a request would not fit, recalled memory gives back at least this share of the tokens
# it held at the start of the turn, so that the next tool results fit without another cut.
YIELD_SHARE = 0.25


class ToolRecord(msgspec.Struct, frozen=True):
    iteration: int
    call: ToolCall
    result: str
    is_error: bool
    duration_ms: float
    effects: tuple[Effect, ...] = ()
    approval: str | None = None  # approved | denied | expired, for `confirm` tools
    ran: bool = True
    source: str | None = None  # another program's tool: who (its result is fenced as data)


class SteeringNote(msgspec.Struct, frozen=True):
    """Words the person sent while the turn was running."""

    text: str
    after_iteration: int


class Note(msgspec.Struct, frozen=True):
    """Something the loop itself put in the trail: a summary, a restart marker, a dropped draft."""

    text: str


TrailItem = ToolRecord | SteeringNote | Note


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
    prompt_tokens: int = 0  # of tokens_total, as the providers reported them
    completion_tokens: int = 0


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
        state: str = "",
        memory: str = "",
        identity: str = "",
        world: str = "",
        situation: str = "",
        template: str = "act_user",
        extra: dict[str, str] | None = None,
    ) -> None:
        """`template`: the prompt file of the single user message (act_user for the person's
        turns; a background path has its own), rendered with the sections below and `extra`,
        the values only that template has.

        The request is laid out so that what changes least comes first, and a model server can
        reuse the previous turn's prompt up to where this one differs: the tools; the system
        prompt (prompts/act_system.md, static) with who the person is; then the user message,
        which begins with the Current State (`state`: the checkpoint, which changes only when the
        history starts anew) and the history (its start stays put for many turns: the context
        builder trims it a block at a time) and goes on with what is new every turn: the time
        (`now_text`), `situation` (where the conversation stands), what recall found
        (`memory`), the world state, and last the message and the trail. The message marks
        where the history ends (Message.cuts)."""
        self._prompts = prompts
        self._template = template
        self._extra = dict(extra or {})
        self.user_text = user_text
        self.history = tuple(history)
        self.state = state
        self._situation = situation
        self._memory = memory
        self._identity = identity
        self._world = world
        self._now = now_text
        self._tools = tools
        self._max_iterations = max_iterations
        self._max_result_chars = max_result_chars
        self._system = self._render_system()
        self.iteration = 0
        self.trail: list[TrailItem] = []
        self.records: list[ToolRecord] = []  # every tool record of the turn, kept past compaction
        self.steering: list[SteeringNote] = []
        self.tokens_total = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.llm_calls = 0
        self.llm_seconds = 0.0  # time spent waiting on the LLM, as the provider measured it
        self.restarts = 0
        self.tool_counts: Counter[str] = Counter()
        self._forced = False
        self._compacted = 0  # trail items the pending compaction request covers
        self._history_text: tuple[tuple[HistoryLine, ...], bool, str, tuple[int, ...]] | None \
            = None
        self.images: tuple[Image, ...] = ()  # the person's images: every request carries them
        self._repeated: tuple[ToolCall, ...] = ()  # calls dropped as repeats, not yet answered
        self._memory_lines: tuple[MemoryLine, ...] = ()  # `_memory` line by line (use_context)
        self._memory_start = 0  # their estimated tokens before any gave room back

    @property
    def system(self) -> str:
        """The system prompt: the same on every request of every turn while who the person is
        stays the same (no time in it)."""
        return self._system

    @property
    def answer_forced(self) -> bool:
        """True when the next request offers no tools and asks for the final answer."""
        return self._forced or self.iteration >= self._max_iterations

    # -- requests --

    def request(self) -> ChatRequest:
        for call in self._repeated:  # every call the model asked for is answered, run or not
            self.skip(call, "repeated", times=REPEAT_LIMIT - 1)
        self._repeated = ()
        f = self._prompts.fragment
        trail = self.render_trail()
        if self.answer_forced:
            trail = f"{trail}\n\n{self._prompts.render('act_final')}"
        history = self.render_history()
        head, rest = self._prompts.render_split(
            self._template, "history",
            **self._extra,
            now=self._now,
            state=self.state or f("state_empty"),
            situation=f("situation", text=self._situation) if self._situation
            else f("situation_empty"),
            world=self._world or f("world_empty"),
            memory=self._memory or f("memory_empty"),
            history=history,
            user_text=self.user_text,
            trail=trail,
        )
        tools = () if self.answer_forced else self._tools
        message = Message("user", head + rest, self.images, cuts=self._cuts(head))
        return ChatRequest(system=self._system, messages=(message,), tools=tools)

    def trail_summary_request(self) -> ChatRequest:
        """Compaction stage 1: ask for one summary of the trail."""
        self._compacted = len(self.trail)
        text = self._prompts.render(
            "compact_trail", user_text=self.user_text, trail=self.render_trail()
        )
        return ChatRequest(system="", messages=(Message("user", text),))

    def checkpoint_request(self) -> ChatRequest:
        """Compaction stage 2: ask for a Current State covering the history and this turn."""
        self._compacted = len(self.trail)
        text = self._prompts.render(
            "checkpoint",
            state=self.state or self._prompts.fragment("checkpoint_state_empty"),
            history=self.render_history(),
            user_text=self.user_text,
            trail=self.render_trail(),
        )
        return ChatRequest(system="", messages=(Message("user", text),))

    # -- answers --

    def absorb(self, response: ChatResponse) -> Step:
        self.count(response)
        if not response.tool_calls or self.answer_forced:
            return Answer(response.text.strip())
        self.iteration += 1
        runnable: list[ToolCall] = []
        for n, call in enumerate(response.tool_calls):
            if self._would_repeat(call, runnable):
                self._forced = True
                self._repeated = response.tool_calls[n:]  # answered after the others ran
                break
            runnable.append(call)
        return Calls(tuple(runnable))

    def count(self, response: ChatResponse) -> None:
        """Account one LLM call of this turn (loop or compaction) in its metrics."""
        self.llm_calls += 1
        self.tokens_total += response.usage.total_tokens
        self.prompt_tokens += response.usage.prompt_tokens
        self.completion_tokens += response.usage.completion_tokens
        self.llm_seconds += response.latency_s

    def record(self, call: ToolCall, result: str, *, is_error: bool, duration_ms: float,
               effects: tuple[Effect, ...] = (), approval: str | None = None,
               source: str | None = None) -> ToolRecord:
        """A call that ran; `source`: the program whose tool it is (its result is data)."""
        self.tool_counts[call.name] += 1
        return self._add(ToolRecord(self.iteration, call, self._clip(result), is_error,
                                    duration_ms, effects, approval, source=source))

    def skip(self, call: ToolCall, reason: str, *, approval: str | None = None,
             **values: object) -> ToolRecord:
        """A call the model asked for that did not run; the model sees why. `reason` names a
        reason_* fragment, `values` fill its placeholders."""
        text = self._prompts.fragment(
            "not_run", reason=self._prompts.fragment(f"reason_{reason}", **values)
        )
        return self._add(ToolRecord(self.iteration, call, text, True, 0.0, approval=approval,
                                    ran=False))

    def steer(self, text: str) -> None:
        note = SteeringNote(text, self.iteration)
        self.trail.append(note)
        self.steering.append(note)
        self._forced = False  # a new direction earns a new chance to use tools

    def seed_memory(self, memory: str) -> None:
        self._memory = memory

    def use_context(self, *, identity: str, state: str, memory: str | tuple[MemoryLine, ...],
                    history: Sequence[HistoryLine], tools: tuple[ToolSpec, ...],
                    world: str = "", situation: str = "") -> None:
        """The turn's context, gathered and fitted before the first request. `memory`: the
        memory section, line by line when it may give room back (yield_memory)."""
        self._identity = identity
        self._system = self._render_system()
        self._world = world
        self.state = state
        self._situation = situation
        self._memory_lines = () if isinstance(memory, str) else memory
        self._memory = memory if isinstance(memory, str) else memory_text(memory)
        self._memory_start = line_tokens(self._memory_lines)
        self.history = tuple(history)
        self._tools = tools

    def yield_memory(self, tokens: int) -> int:
        """Give the turn's own words room that recalled memory held (they count for more than
        what recall guessed might matter): drop memory lines until at least `tokens` (estimated)
        and YIELD_SHARE of the section's start are free, the last first (what comes before them
        stays the same for a prefix cache), the best (MemoryLine.best) last. No LLM call.
        Returns the lines dropped (0: no memory left)."""
        if not self._memory_lines:
            return 0
        kept = shed(self._memory_lines, max(tokens, round(self._memory_start * YIELD_SHARE)))
        dropped = len(self._memory_lines) - len(kept)
        self._memory_lines, self._memory = kept, memory_text(kept)
        return dropped

    def note(self, fragment: str, **values: object) -> None:
        """A note of the loop's own in the trail, from a note_* fragment."""
        self.trail.append(Note(self._prompts.fragment(f"note_{fragment}", **values)))

    # -- compaction --

    def can_summarise_trail(self) -> bool:
        return len(self.trail) > 1 or (len(self.trail) == 1 and not isinstance(self.trail[0], Note))

    def can_restart(self) -> bool:
        return self.restarts < MAX_RESTARTS

    def apply_trail_summary(self, summary: str) -> None:
        """Stage 1: the summary replaces the items it covers; later ones (steering) stay."""
        later = self.trail[self._compacted:]
        self.trail = [Note(self._prompts.fragment("note_trail_summary", summary=summary)),
                      *later]

    def restart(self, checkpoint: str) -> None:
        """Stage 2: the checkpoint replaces history and trail; the loop starts at iteration 0."""
        later = self.trail[self._compacted:]
        self.state = checkpoint
        self.history = ()
        self.trail = [Note(self._prompts.fragment("note_restart")), *later]
        self.iteration = 0
        self.restarts += 1
        self._forced = False

    # -- results --

    def pending_effects(self) -> tuple[Effect, ...]:
        return tuple(e for r in self.records for e in r.effects)

    def metrics(self) -> TurnMetrics:
        return TurnMetrics(
            tokens_total=self.tokens_total,
            tools=dict(self.tool_counts),
            llm_calls=self.llm_calls,
            iterations=self.iteration,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
        )

    def render_history(self) -> str:
        return self._rendered_history()[0]

    def _rendered_history(self) -> tuple[str, tuple[int, ...]]:
        """The history's text, and where each of its lines but the last ends in it."""
        cached = self._history_text
        if cached is not None and cached[0] is self.history and cached[1] == bool(self.state):
            return cached[2], cached[3]  # every request of a turn shows the same history
        text, ends = history_text(self._prompts, self.history, after_state=bool(self.state))
        self._history_text = (self.history, bool(self.state), text, ends)
        return text, ends

    def _cuts(self, head: str) -> tuple[int, ...]:
        """Message.cuts of a user message that begins with `head` (the prompt up to the end of
        the history): after each line of the history, and at its end."""
        text, ends = self._rendered_history()
        if not head.endswith(text):
            return ()
        start = len(head) - len(text)
        return (*(start + end for end in ends), len(head))

    def render_trail(self) -> str:
        f = self._prompts.fragment
        if not self.trail:
            return f("trail_empty")
        blocks = []
        for n, item in enumerate(self.trail, 1):
            match item:
                case ToolRecord(call=call, result=result, source=source):
                    if source is not None:
                        result = self._prompts.fence(
                            f("fence_result", tool=call.name, provider=source), result)
                    blocks.append(f("trail_tool", n=n, name=call.name,
                                    args=call.raw_args or "{}", result=result))
                case SteeringNote(text=text):
                    blocks.append(f("trail_steering", n=n, text=text))
                case Note(text=text):
                    blocks.append(f("trail_note", n=n, text=text))
        return "\n\n".join(blocks)

    # -- internals --

    def _render_system(self) -> str:
        identity = self._identity or self._prompts.fragment("identity_empty")
        return self._prompts.render("act_system", identity=identity)

    def _add(self, record: ToolRecord) -> ToolRecord:
        self.trail.append(record)
        self.records.append(record)
        return record

    def _clip(self, result: str) -> str:
        if len(result) > self._max_result_chars:
            return result[: self._max_result_chars] + " …(truncated)"
        return result

    def _would_repeat(self, call: ToolCall, queued: list[ToolCall]) -> bool:
        recent = [r.call for r in self.trail if isinstance(r, ToolRecord) and r.ran] + queued
        tail = recent[-(REPEAT_LIMIT - 1):]
        return len(tail) == REPEAT_LIMIT - 1 and all(
            c.name == call.name and c.raw_args == call.raw_args for c in tail
        )
