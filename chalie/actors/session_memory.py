"""The Session's memory steps before the loop: the identity hook, then the turn's context.

The identity hook needs no LLM: "call me Sam" stores the name as a trait with the turn, and a
message that says only that is answered at once. Everything else gathers its context (identity,
Current State, hybrid recall, history, tools) on the worker pool, where the query is embedded,
and starts the loop when it comes back.
"""

from __future__ import annotations

from typing import Any

import structlog

from chalie.actors.messages import ContextReady
from chalie.actors.session_base import SessionBase
from chalie.memory import context
from chalie.memory.context import NAME_KEY, TurnContext
from chalie.memory.identity import NameStatement, acknowledgement
from chalie.store import queries
from chalie.store.effects import RememberFact

log = structlog.get_logger("chalie.session")


class MemoryMixin(SessionBase):
    def _identity_hook(self, statement: NameStatement) -> bool:
        """Store a name the person gave; True when that was the whole message and the turn
        is answered already."""
        turn = self._require_turn()
        fact = RememberFact(key=NAME_KEY, value=statement.name, kind="trait", source="identity",
                            confidence=1.0)
        turn.effects.append(fact)
        log.info("name_stated", whole=statement.whole)
        if not statement.whole:
            return False
        previous = queries.current_value(self._deps.read(), NAME_KEY)
        self._finish("answered", text=acknowledgement(statement.name, previous))
        return True

    def _gather_context(self) -> None:
        turn = self._require_turn()
        d = self._deps
        turn.phase = "context"  # the turn's opening frames said "retrieving_memory" already
        turn_id, text, channel = turn.id, turn.user_text, self.channel
        system = turn.loop.system
        tools = d.tools.specs()
        pending = tuple(e for e in turn.effects if isinstance(e, RememberFact))
        ratio = self._token_ratio
        world = d.world.top() if d.world is not None else []

        def job() -> Any:
            built = context.build(
                d.read(), channel=channel, text=text, recall=d.recall, prompts=d.prompts,
                system=system, tools=tools, settings=d.context, token_ratio=ratio,
                pending=pending, world=world,
            )
            log.info("context_ready", recalled=len(built.recalled), tokens=built.tokens,
                     degraded=built.degraded)
            return ContextReady(turn_id, built)

        self._submit(job)

    def _on_context(self, ctx: TurnContext) -> None:
        turn = self._require_turn()
        turn.loop.use_context(identity=ctx.identity, state=ctx.state, memory=ctx.memory,
                              history=ctx.history, tools=ctx.tools, world=ctx.world)
        turn.history_upto = ctx.history_upto
        turn.recalled = ctx.recalled
        self._ask_llm()
