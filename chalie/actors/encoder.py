"""The Encoder: transcript windows become episodes, and every memory item gets its vector.

Two background duties, both nudged by the StoreWriter after it stores something (MemoryGrew):
- Encoding. Once a channel's transcript has grown by `memory.encode_every_rows` messages since
  its last encoding, one LLM call (prompts/episode_encoding.md, structured output) turns the
  window into episodes and facts, which the StoreWriter stores with the new encoding mark. Facts
  come only from the person's own lines, each stored with the transcript id of its line: one
  the answer puts on a paired program's line or on Chalie's is dropped and logged
  (`encoder_fact_dropped`, chalie/memory/encoding.py). The prompt shows the current facts
  nearest in meaning to the person's lines, and a new fact names those it supersedes
  (chalie.memory.updates). An answer that does not fit the schema
  is retried once; a second bad answer, or a failed call, skips the window (a metric), and the
  channel's encoding backs off (chalie/background/backoff.py: the log says so once, /health
  and the dashboard show why): nudges are ignored until the wait, doubling after each failure
  in a row, is over; then the window is tried again on a timer of its own, not on the person's
  turn. At most one encoding per channel is in flight; nudges meanwhile are coalesced.
- Indexing. `memory.index_delay_s` after new items arrive, they are embedded in id order, one
  kind at a time, in batches of `memory.embed_batch`, into the current embedder's vector space;
  the StoreWriter stores each batch and says when, and the next batch starts. After a change
  of embedder the same pass re-embeds everything, and once the new space has caught up the old
  ones are dropped. When the embedder fails, the pass waits (doubling from 5 s to 5 min) and
  tries again. An in-process embedder yields the GIL every few texts, so user turns go on.
LLM and embedding calls run on the background pool: the mailbox never blocks, and user turns
keep the main pool to themselves.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import apsw
import msgspec
import structlog

from chalie.act.snapshots import snapshot
from chalie.actors.encoder_messages import (
    EncodeTail,
    EncodeWindow,
    IndexBatch,
    MemoryGrew,
    RetryEncoding,
)
from chalie.actors.store_writer_messages import (
    DropSpace,
    SaveSnapshots,
    StoreEpisodes,
    StoreVectors,
)
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.actors.work import Work
from chalie.background.backoff import Backoff
from chalie.background.governor import Governor
from chalie.clock import Clock, Timer
from chalie.config import LlmConfig, MemoryConfig
from chalie.errors import LlmError, StructuredOutputError
from chalie.llm.types import LlmProvider
from chalie.memory import encoding, updates
from chalie.memory.embedders import Embedder
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.store import memory_queries as mq
from chalie.store.concept_rows import ConceptRow
from chalie.store.fact_rows import StoredFact
from chalie.store.memory_queries import WindowLine
from chalie.store.memory_writes import SnapshotRow
from chalie.values.memory import Kind

log = structlog.get_logger("chalie.encoder")

BACKOFF_INITIAL_S = 5.0
BACKOFF_MAX_S = 300.0
TAIL_ROWS = 2  # after a silence, a window this small is encoded too (one exchange)
INDEX_ORDER = (Kind.KNOWLEDGE, Kind.EPISODE, Kind.TRANSCRIPT)  # small and valuable first
IN_PROCESS_CHUNK = 4  # texts an in-process embedder embeds before the job yields the GIL
ENCODER = "encoder"  # the job's name in the backoff, /health and the metrics


class _Sweep(msgspec.Struct, frozen=True, tag=True):
    """Look at every channel and the whole index (at start, and after a pause)."""


@dataclass(frozen=True)
class EncoderDeps:
    provider: LlmProvider
    prompts: Prompts
    embedder: Embedder
    space_id: int
    memory: MemoryConfig
    llm: LlmConfig
    read: Callable[[], apsw.Connection]
    clock: Clock
    pool: Executor
    directory: Directory
    metrics: Metrics
    governor: Governor | None = None  # encodings pause while the encoder's budget is used up
    backoff: Backoff | None = None  # a channel whose encodings keep failing waits


class Encoder(SupervisedActor):
    def __init__(self, link: Link | None, *, deps: EncoderDeps) -> None:
        super().__init__(link)
        self._d = deps
        self._work = Work(deps.pool, deps.provider, deps.metrics, path="encoder",
                          governor=deps.governor)
        self._budget_timer: Timer | None = None
        self._encoding: set[str] = set()
        self._indexing = False
        self._index_again = False
        self._retry: Timer | None = None
        self._soon: Timer | None = None
        self._backoff = BACKOFF_INITIAL_S
        self._dropped: set[int] = set()
        self._waits: dict[str, Timer] = {}  # channel -> its retry after failed encodings

    def started(self) -> None:
        self.tell_self(_Sweep())

    def on_stop(self) -> None:
        for timer in (self._retry, self._soon, self._budget_timer, *self._waits.values()):
            if timer is not None:
                timer.cancel()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="encoder"):
            match message:
                case MemoryGrew(channel=channel):
                    if channel is not None:
                        self._maybe_encode(channel)
                    self._index_soon()
                case EncodeTail(channel=channel):
                    self._maybe_encode(channel, at_least=TAIL_ROWS)
                case _IndexNow():
                    self._soon = None
                    self._index()
                case EncodeWindow(channel=channel, stored=stored, error=error):
                    self._encoding.discard(channel)
                    if error:
                        self._back_off(channel, error)
                    elif stored:  # a backlog is encoded window after window
                        if self._d.backoff is not None:
                            self._d.backoff.succeeded(ENCODER, channel)
                        self._maybe_encode(channel)
                case RetryEncoding(channel=channel):
                    self._waits.pop(channel, None)
                    self._maybe_encode(channel, at_least=TAIL_ROWS)
                case IndexBatch(more=more, error=error):
                    self._indexed(more, error)
                case _Resume():
                    self._retry = None
                    self._index()
                case _BudgetRoom():
                    self._budget_timer = None
                    self.tell_self(_Sweep())
                case _Sweep():
                    for channel in mq.channels_to_encode(self._d.read(),
                                                         self._d.memory.encode_every_rows):
                        self._maybe_encode(channel)
                    self._index()
                case _:
                    log.warning("unexpected_message", message=type(message).__name__)

    # -- encoding --

    def _maybe_encode(self, channel: str, at_least: int | None = None) -> None:
        """Encode the channel's next window once `at_least` messages (memory.encode_every_rows
        unless a silence says otherwise) wait for it."""
        if channel in self._encoding:
            return
        conn = self._d.read()
        upto = mq.encoded_upto(conn, channel)
        needed = self._d.memory.encode_every_rows if at_least is None else at_least
        if mq.unencoded_count(conn, channel, upto) < needed:
            return
        backoff = self._d.backoff
        if backoff is not None and not backoff.allows(ENCODER, channel):
            failing = backoff.failing(ENCODER, channel)
            if failing is not None and channel not in self._waits:  # a restarted encoder
                self._retry_at(channel, failing.retry_at)
            return  # the wait's own timer tries again (RetryEncoding)
        governor = self._d.governor
        if governor is not None and not governor.has_room("encoder"):
            self._wait_for_budget(governor.frees_at("encoder"))
            return
        self._encoding.add(channel)
        encoding_id = f"encoding-{uuid.uuid4().hex}"
        log.info("encoding_started", channel=channel, after_transcript_id=upto,
                 encoding_id=encoding_id)
        self._background(lambda: self._encode(channel, upto, encoding_id),
                         on_crash=EncodeWindow(channel, stored=False))

    def _back_off(self, channel: str, error: str) -> None:
        """The window could not be encoded: wait before the channel's next try, on a timer."""
        backoff = self._d.backoff
        if backoff is None:
            return
        self._retry_at(channel, backoff.failed(ENCODER, channel, error).retry_at)

    def _retry_at(self, channel: str, when: float) -> None:
        timer = self._waits.pop(channel, None)
        if timer is not None:
            timer.cancel()
        self._waits[channel] = self._d.clock.call_at(
            when, lambda: self.tell_self(RetryEncoding(channel)))

    def _wait_for_budget(self, frees_at: float) -> None:
        """The encoder's budget is used up: encode again (a sweep) once it frees room."""
        if self._budget_timer is not None or frees_at == float("inf"):
            return
        self._budget_timer = self._d.clock.call_at(frees_at,
                                                   lambda: self.tell_self(_BudgetRoom()))

    def _encode(self, channel: str, upto: int, encoding_id: str) -> Any:
        """On the background pool: one window, at most two LLM calls."""
        d = self._d
        lines = mq.window(d.read(), channel, upto, d.memory.encode_max_rows)
        if not lines:
            return EncodeWindow(channel, stored=False)
        snaps: list[SnapshotRow] = []
        error: str | None = None
        tokens = calls = 0
        # While the channel backs off, the backoff said so once: a failed retry is info.
        warn = log.warning if d.backoff is None or d.backoff.failing(ENCODER, channel) is None \
            else log.info
        known = self._known(lines)
        shown = {fact.id for fact in known}
        for attempt in (1, 2):
            req = encoding.request(d.prompts, lines, retry_error=error, known=known)
            snaps.append(snapshot(req, call=attempt, purpose="episode_encoding",
                                  now=d.clock.time()))
            try:
                answer = self._work.call_llm(req, d.llm.request_timeout_s)
                tokens += answer.usage.total_tokens
                calls += 1
                with structlog.contextvars.bound_contextvars(channel=channel,
                                                             encoding_id=encoding_id):
                    window = encoding.to_window(encoding.parse(answer.text), lines,
                                                known=shown)
            except StructuredOutputError as e:
                error = str(e)
                d.metrics.encodings.labels(outcome="retried" if attempt == 1 else "skipped").inc()
                warn("encoding_invalid", channel=channel, attempt=attempt, error=error)
                continue
            except LlmError as e:
                d.metrics.encodings.labels(outcome="failed").inc()
                warn("encoding_failed", channel=channel, error=str(e))
                error = f"the light model failed to encode the conversation: {e}"
                break
            d.metrics.encodings.labels(outcome="encoded").inc()
            self._tell(StoreEpisodes(channel, upto, lines[-1].id, encoding_id, window.episodes,
                                     window.facts, window.fact_turn_id, tuple(snaps),
                                     tokens=tokens, llm_calls=calls,
                                     concepts=self._concepts(window.concepts),
                                     relations=window.relations, space_id=d.space_id,
                                     situation=window.situation))
            return None
        else:
            warn("encoding_skipped", channel=channel, transcript_from=lines[0].id,
                 transcript_to=lines[-1].id, reason="two invalid answers")
            error = f"the light model cannot write the episode JSON: {error}"
        self._tell(SaveSnapshots(encoding_id, tuple(snaps), tokens=tokens, llm_calls=calls))
        return EncodeWindow(channel, stored=False, error=error or "")

    def _known(self, lines: Sequence[WindowLine]) -> list[StoredFact]:
        """The current facts nearest in meaning to the person's lines of the window, which a
        fact the window states may replace (chalie.memory.updates)."""
        d = self._d
        said = [(line.id, line.text) for line in lines if line.role == encoding.PERSON]
        return updates.for_lines(d.read(), said, embedder=d.embedder, space_id=d.space_id,
                                 limit=d.memory.encoder_known_facts,
                                 min_similarity=d.memory.update_similarity,
                                 timeout_s=d.memory.embed_timeout_s)

    def _concepts(self, names: tuple[str, ...]) -> tuple[ConceptRow, ...]:
        """The window's concepts with their vectors (so that near-duplicates merge); when the
        embedder fails they go without, and merge by name only."""
        if not names:
            return ()
        d = self._d
        try:
            vectors = d.embedder.embed(list(names), timeout_s=d.memory.embed_timeout_s)
        except Exception as e:  # EmbedError, or a broken embedder
            log.warning("concepts_not_embedded", error=str(e))
            return tuple(ConceptRow(name) for name in names)
        return tuple(ConceptRow(name, vector)
                     for name, vector in zip(names, vectors, strict=True))

    # -- indexing --

    def _index_soon(self) -> None:
        """Embed new items after memory.index_delay_s, so that what a conversation adds in that
        time is embedded in one batch (one background job, one transaction) instead of a
        batch per turn."""
        delay = self._d.memory.index_delay_s
        if delay <= 0:
            self._index()
        elif self._indexing or self._retry is not None:
            self._index_again = True
        elif self._soon is None:
            self._soon = self._d.clock.call_later(delay, lambda: self.tell_self(_IndexNow()))

    def _index(self) -> None:
        if self._indexing or self._retry is not None:
            self._index_again = True
            return
        self._indexing = True
        self._index_again = False
        self._background(self._embed_batch, on_crash=IndexBatch(more=True, error="crashed"))

    def _embed_batch(self) -> Any:
        """On the background pool: embed the next batch of one kind and hand it to the writer."""
        d = self._d
        conn = d.read()
        done = mq.progress(conn, d.space_id)
        d.metrics.vectors_pending.set(mq.pending_estimate(conn, done))
        for kind in INDEX_ORDER:
            rows = mq.unembedded(conn, kind, done[kind], d.memory.embed_batch)
            if rows:
                break
        else:
            return IndexBatch(more=False)
        texts = [text for _, text in rows]
        step = IN_PROCESS_CHUNK if d.embedder.in_process else len(texts)
        try:
            vectors: list[bytes] = []
            for start in range(0, len(texts), step):
                vectors += d.embedder.embed(texts[start:start + step],
                                            timeout_s=d.memory.embed_timeout_s)
                time.sleep(0)  # give the GIL to any turn waiting for it
        except Exception as e:  # EmbedError, or a broken embedder: try again later
            d.metrics.embeddings.labels(result="error").inc(len(rows))
            return IndexBatch(more=True, error=str(e))
        d.metrics.embeddings.labels(result="ok").inc(len(rows))
        self._tell(StoreVectors(d.space_id, d.embedder.kind, int(kind),
                                tuple((i, v) for (i, _), v in zip(rows, vectors, strict=True)),
                                rows[-1][0], more=True))
        return None

    def _indexed(self, more: bool, error: str | None) -> None:
        self._indexing = False
        if error is not None:
            log.warning("embedding_paused", error=error, retry_in_s=self._backoff)
            delay, self._backoff = self._backoff, min(BACKOFF_MAX_S, self._backoff * 2)
            self._retry = self._d.clock.call_later(delay, lambda: self.tell_self(_Resume()))
            return
        self._backoff = BACKOFF_INITIAL_S
        if more or self._index_again:
            self._index()
            return
        self._d.metrics.vectors_pending.set(0)
        for space_id in mq.stale_spaces(self._d.read(), self._d.space_id):
            if space_id not in self._dropped:  # the current space has caught up
                self._dropped.add(space_id)
                log.info("vector_space_stale", space_id=space_id, current=self._d.space_id)
                self._tell(DropSpace(space_id))

    # -- plumbing --

    def _background(self, job: Callable[[], Any], *, on_crash: Any) -> None:
        context = structlog.contextvars.get_contextvars()

        def run() -> None:
            with structlog.contextvars.bound_contextvars(**context):
                try:
                    reply = job()
                except Exception:
                    log.exception("encoder_job_failed")
                    reply = on_crash
            if reply is not None:
                self.tell_self(reply)

        self._d.pool.submit(run)

    def _tell(self, message: Any) -> None:
        self._d.directory.tell("store_writer", message)


class _Resume(msgspec.Struct, frozen=True, tag=True):
    """The embedding pause is over."""


class _BudgetRoom(msgspec.Struct, frozen=True, tag=True):
    """The encoder's budget may have room again."""


class _IndexNow(msgspec.Struct, frozen=True, tag=True):
    """The delay before embedding new items is over."""
