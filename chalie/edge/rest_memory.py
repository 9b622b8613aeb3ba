"""/api/memory: the person browses, searches and forgets what Chalie remembers.

Reads run on worker threads with their own read-only connections; forgetting goes through the
StoreWriter, which removes the item with its full-text and vector rows in one transaction.
Browsing and searching never strengthen a memory (only recall into a prompt does).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import apsw
import msgspec

from chalie.actors.store_writer_messages import ForgetItem
from chalie.edge.api_spec import COOKIE_AUTH, OFFSET, Operation, Param, limit_param, text_param
from chalie.edge.rest_base import (
    MAX_SQL_INT,
    ApiError,
    AuthedHandler,
    QueryParams,
    shown,
    whole_number,
)
from chalie.memory import fts
from chalie.memory.recall import Hit, Recalled
from chalie.memory.redact import Redactor
from chalie.store import memory_queries as mq
from chalie.values.memory import Kind, KindName, split

MAX_QUERY_CHARS = 1000
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
MAX_K = 50
DEFAULT_K = 12
FORGET_TIMEOUT_S = 10.0


class KnowledgeItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A fact (memory_queries.knowledge_rows): valid from `valid_from` until `valid_to`
    (null while current), when `superseded_by` replaced it. `source` says who stored it; an
    "encoder" fact was read from the conversation, from the person's message whose transcript
    id is `source_line` (null for the others)."""

    id: int
    key: str
    value: str
    kind: Literal["fact", "trait", "preference"]
    source: Literal["tool", "identity", "encoder"]
    confidence: float
    turn_id: str | None
    current: bool
    valid_from: float
    valid_to: float | None
    superseded_by: int | None
    source_line: int | None


class Knowledge(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[KnowledgeItem]


class Episode(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An episode (memory_queries.episode_rows): what a stretch of talk was about."""

    id: int
    channel: str
    gist: str
    intent: str
    outcome: str
    entities: list[str]
    open_loops: list[str]
    salience: float
    valence: float
    transcript_from: int
    transcript_to: int
    encoding_id: str
    happened_at: float
    created_at: float


class Episodes(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[Episode]


class SearchHit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One thing recall brought up, with the scores that ranked it."""

    kind: KindName
    id: int
    text: str
    created_at: float
    channel: str | None
    role: str | None  # a message's: user, assistant or program
    key: str | None
    score: float
    rrf: float
    fts_rank: int | None
    vector_rank: int | None
    similarity: float | None
    recency: float
    strength: float
    speaker: str | None = None  # a program's message: the paired program that said it


class SearchResults(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    query: str
    degraded: str | None  # why the vector ranking was left out, when it was
    results: list[SearchHit]


class ForgottenItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    kind: Literal["knowledge", "episode"]
    id: int


class Forgotten(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    forgotten: ForgottenItem


_Q = text_param("q", MAX_QUERY_CHARS, "only the items whose text holds this")
_PAGE = (limit_param(DEFAULT_LIMIT, MAX_LIMIT), OFFSET)


def _page(params: QueryParams) -> tuple[int, int]:
    limit = params.whole("limit", default=DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
    return limit, params.whole("offset", default=0, lo=0)


class KnowledgeHandler(AuthedHandler):
    """GET /api/memory/knowledge[?q=&history=&limit=&offset=]: current facts by key; with
    history=1 also the values they replaced, each with its validity interval."""

    api = {"get": Operation(
        "Current facts by key (with history=1 also the values they replaced)", {200: Knowledge},
        auth=(COOKIE_AUTH,),
        query=(_Q, Param("history", {"type": "string", "enum": ["0", "1", "true", "false"]},
                         "also the replaced values"), *_PAGE))}

    async def get(self) -> None:
        params = self.query_params("q", "history", "limit", "offset")
        query = params.text("q", max_chars=MAX_QUERY_CHARS)
        history = params.flag("history", default=False)
        limit, offset = _page(params)
        rows = await self.off_loop(lambda: mq.knowledge_rows(
            self.ctx.read(), query=query, history=history, limit=limit, offset=offset))
        self.write_json(Knowledge(msgspec.convert(rows, list[KnowledgeItem])))


class EpisodesHandler(AuthedHandler):
    """GET /api/memory/episodes[?q=&limit=&offset=]: newest first; with q, the episodes that
    match it in full text, best first."""

    api = {"get": Operation("Episodes, newest first; with q, those that match it, best first",
                            {200: Episodes}, auth=(COOKIE_AUTH,), query=(_Q, *_PAGE))}

    async def get(self) -> None:
        params = self.query_params("q", "limit", "offset")
        query = params.text("q", max_chars=MAX_QUERY_CHARS)
        limit, offset = _page(params)
        rows = await self.off_loop(lambda: _episodes(self.ctx.read(), query, limit, offset))
        self.write_json(Episodes(msgspec.convert(rows, list[Episode])))


def _episodes(conn: apsw.Connection, query: str | None, limit: int,
              offset: int) -> list[dict[str, Any]]:
    if query is None:
        return mq.episode_rows(conn, ids=None, limit=limit, offset=offset)
    keys = fts.search(conn, query, min(offset + limit, MAX_SQL_INT), kind=Kind.EPISODE)
    ids = [split(key)[1] for key in keys[offset:]]
    rank = {item_id: i for i, item_id in enumerate(ids)}
    rows = mq.episode_rows(conn, ids=ids, limit=len(ids), offset=0) if ids else []
    return sorted(rows, key=lambda row: rank[int(row["id"])])


class SearchHandler(AuthedHandler):
    """GET /api/memory/search?q=...[&k=]: what recall would bring up for `q`, with the scores
    that ranked it ("why did it remember that?")."""

    api = {"get": Operation(
        "What recall would bring up for q, with the scores that ranked it", {200: SearchResults},
        auth=(COOKIE_AUTH,), query=(
            text_param("q", MAX_QUERY_CHARS, "what to recall", required=True),
            Param("k", {"type": "integer", "minimum": 1, "maximum": MAX_K,
                        "default": DEFAULT_K}, "how many results at most")))}

    async def get(self) -> None:
        params = self.query_params("q", "k")
        query = params.required_text("q", max_chars=MAX_QUERY_CHARS)
        k = params.whole("k", default=DEFAULT_K, lo=1, hi=MAX_K)
        recall = self.ctx.recall
        if recall is None:
            raise ApiError(503, "memory search is not available on this server")

        def search() -> tuple[Recalled, Redactor]:
            conn = self.ctx.read()
            return recall.recall(conn, query, k), Redactor(mq.forgotten(conn))

        recalled, redact = await self.off_loop(search)
        self.write_json(SearchResults(query, recalled.degraded,
                                      [search_hit(hit, redact) for hit in recalled.hits]))


def search_hit(hit: Hit, redact: Redactor) -> SearchHit:
    """A hit as the model would see it: what the person forgot is blanked out of older text."""
    item = hit.item
    text = redact(item.text, item.created_at)
    return SearchHit(
        kind=item.kind, id=item.id, text=text, created_at=item.created_at, channel=item.channel,
        role=item.role, key=item.key, score=hit.score, rrf=hit.rrf, fts_rank=hit.fts_rank,
        vector_rank=hit.vector_rank, similarity=hit.similarity, recency=hit.recency,
        strength=hit.strength, speaker=item.speaker)


class _ForgetHandler(AuthedHandler):
    """DELETE /api/memory/<kind>/<id>: forget one item, its index rows with it."""

    kind: ClassVar[Literal["knowledge", "episode"]]
    api = {"delete": Operation(
        "Forget one item, its index rows with it", {200: Forgotten}, auth=(COOKIE_AUTH,),
        path=(Param("id", {"type": "integer", "minimum": 1}, "the item's id", required=True),),
        errors=(404,))}

    async def delete(self, id: str) -> None:  # the name the document gives the path's part
        self.query_params()
        item_id = whole_number(id)
        if item_id is None or item_id < 1:
            raise ApiError(400, f"id: must be a positive whole number, got {shown(id)}")
        if item_id > MAX_SQL_INT:  # no row can have it
            raise ApiError(404, f"no {self.kind} item {id.lstrip('0')}")
        if not await self._forget(item_id):
            raise ApiError(404, f"no {self.kind} item {item_id}")
        self.write_json(Forgotten(ForgottenItem(self.kind, item_id)))

    async def _forget(self, item_id: int) -> bool:
        message = ForgetItem(kind=self.kind, item_id=item_id)
        return bool(await self.ask("store_writer", message, timeout=FORGET_TIMEOUT_S))


class ForgetKnowledgeHandler(_ForgetHandler):
    kind = "knowledge"


class ForgetEpisodeHandler(_ForgetHandler):
    kind = "episode"
