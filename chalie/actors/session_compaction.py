"""The Session's compaction detour (spec/message-flow.md, Mid-ACT Compaction), and the
backstop that runs at the turn boundary."""

from __future__ import annotations

from typing import Any

import apsw
import structlog

from chalie.act.budget import PromptBudget, raw_estimate
from chalie.act.snapshots import snapshot
from chalie.actors.messages import BackstopChecked, CompactionReturned, SaveCheckpoint
from chalie.actors.session_base import SessionBase
from chalie.llm.types import ChatRequest, estimate_tokens
from chalie.store import queries
from chalie.store.records import StoredCompaction

log = structlog.get_logger("chalie.session")


class CompactionMixin(SessionBase):
    def _compact(self, request: ChatRequest) -> bool:
        """Start the next compaction stage for an oversized request; False if none is left."""
        turn = self._require_turn()
        tokens = turn.budget.tokens(request)
        if turn.loop.can_summarise_trail():
            stage, side = "trail", turn.loop.trail_summary_request()
        elif turn.loop.can_restart():
            stage, side = "restart", turn.loop.checkpoint_request()
        else:
            log.warning("prompt_over_budget", tokens=tokens, limit=turn.budget.limit)
            return False
        log.info("compaction_started", stage=stage, tokens=tokens, limit=turn.budget.limit)
        turn.snap(side, "compact_trail" if stage == "trail" else "checkpoint",
                  self._deps.clock.time())
        self._status("thinking")
        turn.phase = "compacting"
        remaining = turn.deadline - self._deps.clock.monotonic()
        turn_id, timeout = turn.id, min(remaining, self._deps.llm.request_timeout_s)

        def job() -> Any:
            return CompactionReturned(turn_id, stage, self._work.call_llm(side, timeout), tokens)

        self._submit(job)
        return True

    def _on_compaction(self, returned: CompactionReturned) -> None:
        turn = self._require_turn()
        summary = returned.response.text.strip()
        turn.loop.count(returned.response)
        if returned.stage == "trail":
            turn.loop.apply_trail_summary(summary)
        else:
            turn.loop.restart(summary)
        after = turn.budget.tokens(turn.loop.request())
        record = StoredCompaction(
            stage="trail" if returned.stage == "trail" else "restart",
            tokens_before=returned.tokens_before, tokens_after=after,
            tokens_used=returned.response.usage.total_tokens, summary=summary,
            created_at=self._deps.clock.time(),
        )
        turn.compactions.append(record)
        if returned.stage == "restart":
            self._to_writer(SaveCheckpoint(self.channel, summary, turn.history_upto, turn.id))
        log.info("compaction_done", stage=returned.stage, before=returned.tokens_before,
                 after=after)
        self._ask_llm()

    def _backstop(self, after_turn: str) -> None:
        """At the turn boundary: if the next prompt's history alone would not fit, checkpoint.
        The check reads the store, so it runs on the pool like the call it may lead to."""
        d = self._deps
        if self._backstop_running:
            return
        self._backstop_running = True
        budget = PromptBudget(d.llm.context_window, d.act.compaction_threshold,
                              self._token_ratio)
        channel = self.channel

        def job() -> Any:
            conn = d.read()
            if budget.ratio * self._rough_tokens(conn) <= budget.limit:
                return BackstopChecked()  # well within: no need to render the probe prompt
            probe, upto = self._new_loop(conn, "", "", with_history=True)
            tokens = budget.tokens(probe.request())
            if tokens <= budget.limit or not probe.history:
                return BackstopChecked()
            log.info("compaction_started", stage="backstop", tokens=tokens, limit=budget.limit)
            side = probe.checkpoint_request()
            snap = snapshot(side, call=1, purpose="backstop", now=d.clock.time())
            response = self._work.call_llm(side, d.llm.request_timeout_s)
            summary = response.text.strip()
            probe.restart(summary)
            audit = StoredCompaction("backstop", tokens, budget.tokens(probe.request()),
                                     response.usage.total_tokens, summary, d.clock.time())
            self._to_writer(SaveCheckpoint(channel, summary, upto, after_turn, audit, (snap,)))
            return CompactionReturned("backstop", "backstop", response, tokens)

        self._submit(job, turn_id="backstop")

    def _rough_tokens(self, conn: apsw.Connection) -> int:
        """A quick upper estimate of the next prompt's size without its context sections:
        the bare prompt (measured once) plus each line of history since the checkpoint."""
        d = self._deps
        if self._bare_tokens is None:
            bare, _ = self._new_loop(conn, "", "", with_history=False)
            self._bare_tokens = raw_estimate(bare.request())
        checkpoint = queries.latest_checkpoint(conn, self.channel)
        history = queries.recent_transcript(
            conn, self.channel, 2 * d.act.history_turns,
            after_id=checkpoint.upto_transcript_id if checkpoint else 0)
        state = estimate_tokens(checkpoint.text) if checkpoint else 0
        return self._bare_tokens + state + sum(estimate_tokens(h.text) + 4 for h in history)
