"""The innate `memory` tool: remember a fact under a key, recall facts by words.

A remembered fact is an effect stored with the turn; a newer value for the same key supersedes
the old one, and the result tells the model what it replaced. Keys are normalised
(chalie.values.keys), so "Favourite colour" and "favorite color" are one key. The result also
lists the current facts under other keys that the new one may make untrue, found by meaning
(chalie.memory.updates), each with its id; the model names those it replaces in `replaces`
(calling again with the same key and value when it learns of them from the listing). Recall
sees stored facts and the ones this turn has remembered so far, each current fact with what it
replaced.
"""

from __future__ import annotations

import functools
from typing import Any

from chalie.llm.types import ToolSpec
from chalie.memory import updates
from chalie.prompts import Prompts
from chalie.store import fact_rows, proactive_rows
from chalie.store.effects import (
    CloseLoop,
    Effect,
    FactEffect,
    ForgetFact,
    OpenLoop,
    RememberFact,
)
from chalie.store.queries import current_value, facts_matching, has_current_fact
from chalie.tools.base import Danger, ToolContext, ToolOutcome, tool_description, tool_error
from chalie.values.keys import MAX_KEY_CHARS, normalise_key

MAX_KEY = MAX_KEY_CHARS
MAX_VALUE = 4000
RECALL_LIMIT = 20
KINDS = ("fact", "trait", "preference")
MAX_REPLACES = 20


def _facts(pending: tuple[Effect, ...]) -> list[FactEffect]:
    return [e for e in pending if isinstance(e, RememberFact | ForgetFact)]


class MemoryTool:
    danger: Danger = "safe"
    spec = ToolSpec(
        name="memory",
        description=tool_description("memory"),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string",
                           "enum": ["remember", "recall", "open_loop", "close_loop"]},
                "key": {"type": "string", "description": "remember: short name of the fact"},
                "value": {"type": "string", "description": "remember: the fact itself"},
                "kind": {"type": "string", "enum": list(KINDS),
                         "description": "remember: fact (default), trait or preference"},
                "replaces": {"type": "array", "items": {"type": "integer"},
                             "description": "remember: ids of listed facts it makes untrue"},
                "query": {"type": "string", "description": "recall: words to look for"},
                "loop_id": {"type": "integer"},
            },
            "required": ["action"],
        },
    )

    @staticmethod
    def reads_only(args: dict[str, Any]) -> bool:
        return args.get("action") == "recall"

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        action = args.get("action")
        if action == "remember":
            return self._remember(args, ctx)
        if action == "recall":
            return self._recall(args, ctx)
        if action == "open_loop":
            return self._open_loop(args, ctx)
        if action == "close_loop":
            return self._close_loop(args, ctx)
        return tool_error("action must be remember, recall, open_loop or close_loop, got "
                          f"{action!r}")

    @staticmethod
    def _open_loop(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Something to raise with the person later (a thread to pick up)."""
        value = args.get("value")
        if not isinstance(value, str) or not value.strip():
            return tool_error("open_loop needs a non-empty string `value`: what to raise later")
        if len(value) > MAX_VALUE:
            return tool_error(f"value is limited to {MAX_VALUE} characters")
        text = " ".join(value.split())
        return ToolOutcome(text=f"open loop noted: {text}",
                           effects=(OpenLoop(text, source=ctx.path),))

    @staticmethod
    def _close_loop(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        loop_id = args.get("loop_id")
        if isinstance(loop_id, bool) or not isinstance(loop_id, int):
            return tool_error("close_loop needs the integer `loop_id` of an open loop")
        if not proactive_rows.is_open(ctx.read(), loop_id):
            return tool_error(f"no open loop {loop_id}")
        return ToolOutcome(text=f"closed loop {loop_id}", effects=(CloseLoop(loop_id),))

    def _remember(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        key, value, kind = args.get("key"), args.get("value"), args.get("kind", "fact")
        if not isinstance(key, str) or not normalise_key(key):
            return tool_error("remember needs a non-empty string `key`")
        if not isinstance(value, str) or not value.strip():
            return tool_error("remember needs a non-empty string `value`")
        if len(key) > MAX_KEY or len(value) > MAX_VALUE:
            return tool_error(f"key is limited to {MAX_KEY} and value to {MAX_VALUE} characters")
        if kind not in KINDS:
            return tool_error(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        replaces = args.get("replaces") or []
        if not isinstance(replaces, list) or len(replaces) > MAX_REPLACES or any(
                isinstance(i, bool) or not isinstance(i, int) for i in replaces):
            return tool_error(f"replaces must be a list of at most {MAX_REPLACES} fact ids "
                              "(integers, as listed)")
        current = fact_rows.current(ctx.read(), replaces)
        if missing := [i for i in replaces if i not in current]:
            return tool_error(f"no current fact has the id {missing[0]}: replaces names the "
                              "ids a remember or recall result listed")
        fact = RememberFact(key=normalise_key(key), value=value.strip(), kind=kind,
                            replaces=tuple(dict.fromkeys(replaces)))
        before = self._current(fact.key, ctx)
        text = f"remembered {fact.key}: {fact.value}"
        if before is not None and before != fact.value:
            text += f" (this replaces the earlier value: {before})"
        if fact.replaces:
            text += "; it replaces " + "; ".join(
                f"[{i}] {current[i].key}: {current[i].value}" for i in fact.replaces)
        maybe = self._candidates(fact, ctx)
        if maybe:
            prompts = _prompts()
            text += "\n" + prompts.fragment("memory_candidates", facts="\n".join(
                updates.listed(prompts, f) for f in maybe))
        return ToolOutcome(text=text, effects=(fact,))

    @staticmethod
    def _candidates(fact: RememberFact, ctx: ToolContext) -> list[fact_rows.StoredFact]:
        """The current facts the new one may make untrue, but those it already replaces and
        those this turn already replaced or forgot."""
        recall = ctx.recall
        if recall is None:  # no memory behind this turn (a test's): nothing to compare with
            return []
        config = recall.config
        gone = {i for e in ctx.pending if isinstance(e, RememberFact) for i in e.replaces}
        gone.update(fact.replaces)
        forgotten = {e.key for e in _facts(ctx.pending) if isinstance(e, ForgetFact)}
        found = updates.candidates(
            ctx.read(), key=fact.key, value=fact.value, embedder=recall.embedder,
            space_id=recall.space_id, limit=config.update_candidates,
            min_similarity=config.update_similarity, timeout_s=config.query_embed_timeout_s,
            exclude=sorted(gone))
        return [f for f in found if f.key not in forgotten]

    @staticmethod
    def _current(key: str, ctx: ToolContext) -> str | None:
        """The value `key` has now, counting this turn's own remembering and forgetting."""
        for effect in reversed(_facts(ctx.pending)):
            if effect.key == key:
                return effect.value if isinstance(effect, RememberFact) else None
        return current_value(ctx.read(), key)

    def _recall(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        query = args.get("query", "")
        if not isinstance(query, str):
            return tool_error("recall's `query` must be a string")
        needle = query.strip().casefold()
        spelled = normalise_key(needle)  # "colour" also finds "favorite color"
        found: dict[str, str] = {}
        forgotten: set[str] = set()
        for effect in reversed(_facts(ctx.pending)):  # this turn's newest first
            if effect.key in found or effect.key in forgotten:
                continue
            if isinstance(effect, ForgetFact):
                forgotten.add(effect.key)
            elif needle in effect.key or needle in effect.value.casefold() \
                    or (spelled and spelled in effect.key):
                found[effect.key] = effect.value
        pending_keys = {e.key for e in _facts(ctx.pending)}
        words = [w for w in dict.fromkeys((needle, spelled)) if w] or [""]
        for fact in facts_matching(ctx.read(), words, RECALL_LIMIT):
            if fact.key not in found and fact.key not in pending_keys:
                found[fact.key] = fact.value
        if not found:
            return ToolOutcome(text=f"no facts found for {query!r}")
        shown = list(found.items())[:RECALL_LIMIT]
        conn = ctx.read()
        stored = {f.key: f for f in fact_rows.current_with_keys(
            conn, [k for k, _ in shown if k not in pending_keys])}
        history = fact_rows.replaced(conn, [f.id for f in stored.values()])
        prompts = _prompts()
        lines = []
        for k, v in shown:
            known = stored.get(k)
            if known is None or known.value != v:  # this turn's own, not stored yet
                lines.append(f"- {k}: {v}")
                continue
            lines.append(f"- [{known.id}] " + updates.with_history(
                prompts, k, f"{k}: {v}", known.since, history.get(known.id, ())))
        return ToolOutcome(text="\n".join(lines))


@functools.cache
def _prompts() -> Prompts:
    """The shipped prompts' fragments (the tool's descriptions come from the same directory)."""
    return Prompts.load()


class ForgetTool:
    """Drop a stored fact. Destructive, so the person confirms it first."""

    danger: Danger = "confirm"
    spec = ToolSpec(
        name="forget",
        description=tool_description("forget"),
        parameters={
            "type": "object",
            "properties": {"key": {"type": "string", "description": "the fact's key"}},
            "required": ["key"],
        },
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        key = args.get("key")
        if not isinstance(key, str) or not normalise_key(key):
            return tool_error("forget needs a non-empty string `key`")
        key = normalise_key(key)
        known = has_current_fact(ctx.read(), key)
        pending = [e for e in _facts(ctx.pending) if e.key == key]
        if pending:
            known = isinstance(pending[-1], RememberFact)
        if not known:
            return tool_error(f"no stored fact has the key {key!r}")
        return ToolOutcome(text=f"forgot {key}", effects=(ForgetFact(key),))
