"""GET /api/turns: the latest turns, newest first. GET /api/turns/<turn_id>/prompts: every LLM
request of a turn exactly as it was sent.

`chalie snapshot TURN_ID --json` prints the same document, built by `prompts_document`.
"""

from __future__ import annotations

import re
from typing import Any

import apsw

from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.store import memory_queries as mq

TURN_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def prompts_document(conn: apsw.Connection, turn_id: str) -> dict[str, Any] | None:
    """{"turn_id", "prompts": [...]} in call order, or None when none are stored for it."""
    prompts = mq.snapshots(conn, turn_id)
    return {"turn_id": turn_id, "prompts": prompts} if prompts else None


def not_kept(turn_id: str, kept: int) -> str:
    return (f"no prompt snapshots for turn {turn_id!r}: unknown, or older than the last "
            f"{kept} turns (snapshots are kept for the last {kept} turns only)")


class TurnPromptsHandler(AuthedHandler):
    async def get(self, turn_id: str) -> None:
        self.query_params()
        if not TURN_ID_RE.fullmatch(turn_id):
            raise ApiError(400, "turn_id: must be 1 to 128 letters, digits, '_', '.', ':' or "
                                f"'-', got {shown(turn_id)}")
        document = await self.off_loop(lambda: prompts_document(self.ctx.read(), turn_id))
        if document is None:
            raise ApiError(404, not_kept(turn_id, self.ctx.config.memory.snapshots_kept))
        self.write_json(document)


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
    async def get(self) -> None:
        params = self.query_params("channel", "limit", "offset")
        channel = params.text("channel", max_chars=64)
        limit = params.whole("limit", default=20, lo=1, hi=500)
        offset = params.whole("offset", default=0, lo=0)
        items = await self.off_loop(lambda: recent_turns(self.ctx.read(), channel, limit,
                                                         offset))
        self.write_json({"items": items})
