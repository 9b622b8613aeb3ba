"""Side calls: what a turn asks the light model between its own requests, and feeds back into
its loop before it goes on.

- Compaction (spec/message-flow.md, Mid-ACT Compaction): a request that would not fit is shrunk
  first: recalled memory gives its room back (no LLM call), then stage 1 summarises the tool
  trail, stage 2 restarts the loop from a new Current State (which the host may keep as the
  channel's).
- The critic (spec/message-flow-v1.md, Post-action critic verification): on an attended turn, a
  consequential call's result is checked against what the person asked for, when it is on.

Each starts a job on the pool and returns at once; the answer comes back to the host as
CompactionReturned or CriticReturned, and the TurnDriver hands it here to be absorbed before it
asks again or runs the next call. Nothing here calls the driver back.
"""

from __future__ import annotations

from typing import Any

import structlog

from chalie.act import critic
from chalie.actors.driver_deps import DriverDeps, Host, Policy
from chalie.actors.turn import Turn
from chalie.actors.turn_messages import CompactionReturned, CriticReturned
from chalie.frames import Status
from chalie.llm.types import ChatRequest, ToolCall
from chalie.store.records import StoredCompaction

log = structlog.get_logger("chalie.driver")


class SideCalls:
    def __init__(self, *, host: Host, policy: Policy, deps: DriverDeps) -> None:
        self._host = host
        self._policy = policy
        self._d = deps

    # -- compaction --

    def fitted(self, turn: Turn) -> ChatRequest:
        """The turn's next request, with recalled memory giving room back (its last lines
        first, its best last: ActLoop.yield_memory) while it would not fit: the trail and the
        message come before what recall guessed, and this costs no LLM call. What still does
        not fit is compacted (`compact`)."""
        request = turn.loop.request()
        while not turn.budget.fits(request) \
                and (dropped := turn.loop.yield_memory(turn.budget.excess(request))):
            before = turn.budget.tokens(request)
            request = turn.loop.request()
            log.info("memory_yielded", lines=dropped, before=before,
                     after=turn.budget.tokens(request), limit=turn.budget.limit)
        return request

    def compact(self, turn: Turn, request: ChatRequest) -> bool:
        """Start the next compaction stage for an oversized request; False if none is left."""
        tokens = turn.budget.tokens(request)
        if turn.loop.can_summarise_trail():
            stage, side = "trail", turn.loop.trail_summary_request()
        elif turn.loop.can_restart():
            stage, side = "restart", turn.loop.checkpoint_request()
        else:
            log.warning("prompt_over_budget", tokens=tokens, limit=turn.budget.limit)
            return False
        log.info("compaction_started", stage=stage, tokens=tokens, limit=turn.budget.limit)
        d = self._d
        turn.snap(side, "compact_trail" if stage == "trail" else "checkpoint", d.clock.time())
        if self._policy.attended:
            self._host.show(Status(stage="thinking", exchange_id=turn.id))
        turn.phase = "compacting"
        remaining = turn.deadline - d.clock.monotonic()
        turn_id, timeout, work = turn.id, min(remaining, d.request_timeout_s), turn.work or d.work

        def job() -> Any:
            return CompactionReturned(turn_id, stage, work.call_llm(side, timeout, light=True),
                                      tokens)

        work.submit(job, turn_id=turn_id, reply=self._host.tell_self)
        return True

    def compacted(self, turn: Turn, returned: CompactionReturned) -> None:
        """The summary goes into the loop (and, from a restart, to the host)."""
        summary = returned.response.text.strip()
        turn.loop.count(returned.response)
        if returned.stage == "trail":
            turn.loop.apply_trail_summary(summary)
        else:
            turn.loop.restart(summary)
        after = turn.budget.tokens(turn.loop.request())
        turn.compactions.append(StoredCompaction(
            stage="trail" if returned.stage == "trail" else "restart",
            tokens_before=returned.tokens_before, tokens_after=after,
            tokens_used=returned.response.usage.total_tokens, summary=summary,
            created_at=self._d.clock.time(),
        ))
        if returned.stage == "restart":
            self._host.state_written(turn, summary)
        log.info("compaction_done", stage=returned.stage, before=returned.tokens_before,
                 after=after)

    # -- the critic --

    def critique(self, turn: Turn, call: ToolCall, result: str) -> bool:
        """Check a consequential call's result against what the person asked for, on the pool
        with the light model; False when this call is not checked."""
        d = self._d
        remaining = turn.deadline - d.clock.monotonic()
        if d.critic is None or not self._policy.attended or remaining <= 0 \
                or not d.critic.checks(call.name, d.tools.danger(call.name)):
            return False
        request = d.critic.request(turn.loop, call, result)
        turn.snap(request, "critic", d.clock.time())
        turn.phase = "critic"
        turn_id, timeout, work = turn.id, min(remaining, d.request_timeout_s), turn.work or d.work

        def job() -> Any:
            return CriticReturned(turn_id, call, critic.check(
                lambda r: work.call_llm(r, timeout, light=True), request))

        work.submit(job, turn_id=turn_id, reply=self._host.tell_self)
        return True

    def critiqued(self, turn: Turn, returned: CriticReturned) -> None:
        """The check came back: ok goes on; a critique goes into the trail; one that needs the
        person's attention is also shown to them. A failed check goes on as if ok."""
        escalation = critic.absorb(turn.loop, returned.call, returned.checked,
                                   exchange_id=turn.id)
        if escalation is not None:
            self._host.show(escalation)
