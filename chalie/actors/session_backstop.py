"""The Session's post-turn compaction backstop.

At the turn boundary (spec/message-flow.md, post-turn fan-out) the backstop checks whether the
next prompt's history alone would pass the compaction threshold, and if so writes a new Current
State for the channel. The check reads the store, so it runs on the pool like the LLM call it
may lead to; its answer comes back to the Session as BackstopChecked or CompactionReturned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw
import structlog

from chalie.act.budget import PromptBudget, raw_estimate
from chalie.act.snapshots import snapshot
from chalie.actors.session_deps import SessionDeps
from chalie.actors.session_messages import BackstopChecked
from chalie.actors.session_turn import channel_loop
from chalie.actors.store_writer_messages import SaveCheckpoint
from chalie.actors.turn_messages import CompactionReturned
from chalie.actors.work import Work
from chalie.llm.types import estimate_tokens
from chalie.store import queries
from chalie.store.records import StoredCompaction

log = structlog.get_logger("chalie.session")


class Backstop:
    def __init__(self, *, channel: str, deps: SessionDeps, work: Work,
                 reply: Callable[[Any], None]) -> None:
        """`reply` puts the check's answer in the Session's mailbox."""
        self._reply = reply
        self._channel = channel
        self._d = deps
        self._work = work
        self._running = False
        self._bare_tokens: int | None = None  # an empty prompt's size

    @property
    def running(self) -> bool:
        """A check is out on the pool: its answer is on the way to the Session."""
        return self._running

    def done(self) -> None:
        """The check (and the checkpoint it may have written) is over."""
        self._running = False

    def check(self, after_turn: str, token_ratio: float) -> None:
        """If the next prompt's history alone would not fit, checkpoint the channel."""
        d = self._d
        if self._running:
            return
        self._running = True
        budget = PromptBudget(d.llm.context_window, d.act.compaction_threshold, token_ratio)
        channel = self._channel
        work = self._work

        def job() -> Any:
            conn = d.read()
            if budget.ratio * self._rough_tokens(conn) <= budget.limit:
                return BackstopChecked()  # well within: no need to render the probe prompt
            probe, upto = channel_loop(d, conn, channel, "", "", with_history=True)
            tokens = budget.tokens(probe.request())
            if tokens <= budget.limit or not probe.history:
                return BackstopChecked()
            log.info("compaction_started", stage="backstop", tokens=tokens, limit=budget.limit)
            side = probe.checkpoint_request()
            snap = snapshot(side, call=1, purpose="backstop", now=d.clock.time())
            response = work.call_llm(side, d.llm.request_timeout_s, light=True)
            summary = response.text.strip()
            probe.restart(summary)
            audit = StoredCompaction("backstop", tokens, budget.tokens(probe.request()),
                                     response.usage.total_tokens, summary, d.clock.time())
            d.directory.tell("store_writer",
                             SaveCheckpoint(channel, summary, upto, after_turn, audit, (snap,)))
            return CompactionReturned("backstop", "backstop", response, tokens)

        work.submit(job, turn_id="backstop", reply=self._reply)

    def _rough_tokens(self, conn: apsw.Connection) -> int:
        """A quick upper estimate of the next prompt's size without its context sections:
        the bare prompt (measured once) plus each line of history since the checkpoint."""
        d = self._d
        if self._bare_tokens is None:
            bare, _ = channel_loop(d, conn, self._channel, "", "", with_history=False)
            self._bare_tokens = raw_estimate(bare.request())
        checkpoint = queries.latest_checkpoint(conn, self._channel)
        history = queries.recent_transcript(
            conn, self._channel, 2 * d.act.history_turns,
            after_id=checkpoint.upto_transcript_id if checkpoint else 0)
        state = estimate_tokens(checkpoint.text) if checkpoint else 0
        return self._bare_tokens + state + sum(estimate_tokens(h.text) + 4 for h in history)
