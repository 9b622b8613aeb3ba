"""GET /api/turns: the latest turns, newest first. GET /api/turns/<turn_id>/prompts: every LLM
request of a turn exactly as it was sent.

`chalie snapshot TURN_ID --json` prints the same document, built by `prompts_document`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import apsw
import msgspec

from chalie.edge.api_spec import COOKIE_AUTH, OFFSET, Operation, Param, limit_param, text_param
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.store import memory_queries as mq

TURN_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


class PromptSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One LLM request of a turn, as it was sent (memory_queries.snapshots)."""

    call: int
    purpose: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    response_format: dict[str, Any] | None
    created_at: float


class TurnPrompts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    turn_id: str
    prompts: list[PromptSnapshot]


class Turn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    channel: str
    source: str
    user_text: str
    response_text: str | None
    outcome: Literal["answered", "error", "timeout", "cancelled"]
    tokens_total: int
    llm_calls: int
    response_time_s: float
    started_at: float
    finished_at: float


class Turns(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[Turn]


def prompts_document(conn: apsw.Connection, turn_id: str) -> dict[str, Any] | None:
    """{"turn_id", "prompts": [...]} in call order, or None when none are stored for it."""
    prompts = mq.snapshots(conn, turn_id)
    return {"turn_id": turn_id, "prompts": prompts} if prompts else None


def not_kept(turn_id: str, kept: int) -> str:
    return (f"no prompt snapshots for turn {turn_id!r}: unknown, or older than the last "
            f"{kept} turns (snapshots are kept for the last {kept} turns only)")


class TurnPromptsHandler(AuthedHandler):
    api = {"get": Operation(
        "Every LLM request of a turn exactly as it was sent, in call order", {200: TurnPrompts},
        auth=(COOKIE_AUTH,), errors=(404,), path=(Param(
            "turn_id", {"type": "string", "pattern": f"^{TURN_ID_RE.pattern}$"}, "the turn",
            required=True),),
        description="Snapshots are kept for the last memory.snapshots_kept turns only.")}

    async def get(self, turn_id: str) -> None:
        self.query_params()
        if not TURN_ID_RE.fullmatch(turn_id):
            raise ApiError(400, "turn_id: must be 1 to 128 letters, digits, '_', '.', ':' or "
                                f"'-', got {shown(turn_id)}")
        document = await self.off_loop(lambda: prompts_document(self.ctx.read(), turn_id))
        if document is None:
            raise ApiError(404, not_kept(turn_id, self.ctx.config.memory.snapshots_kept))
        self.write_json(msgspec.convert(document, TurnPrompts))


_TURN_FIELDS = ("id", "channel", "source", "user_text", "response_text", "outcome",
                "tokens_total", "llm_calls", "response_time_s", "started_at", "finished_at")


def recent_turns(conn: apsw.Connection, channel: str | None, limit: int,
                 offset: int) -> list[dict[str, Any]]:
    where, args = ("WHERE channel = ?", (channel,)) if channel else ("", ())
    rows = conn.execute(
        f"SELECT {', '.join(_TURN_FIELDS)} FROM turns {where} "
        "ORDER BY finished_at DESC, rowid DESC LIMIT ? OFFSET ?", (*args, limit, offset),
    ).fetchall()
    return [dict(zip(_TURN_FIELDS, row, strict=True)) for row in rows]


class TurnsHandler(AuthedHandler):
    api = {"get": Operation("The latest turns, newest first", {200: Turns}, auth=(COOKIE_AUTH,),
                            query=(text_param("channel", 64, "only this channel's turns"),
                                   limit_param(20, 500), OFFSET))}

    async def get(self) -> None:
        params = self.query_params("channel", "limit", "offset")
        channel = params.text("channel", max_chars=64)
        limit = params.whole("limit", default=20, lo=1, hi=500)
        offset = params.whole("offset", default=0, lo=0)
        items = await self.off_loop(lambda: recent_turns(self.ctx.read(), channel, limit,
                                                         offset))
        self.write_json(Turns(msgspec.convert(items, list[Turn])))
