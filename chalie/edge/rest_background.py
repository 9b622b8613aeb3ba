"""What the background paths cost and said: GET /api/spending, GET /api/proactive.

/api/spending?days=7: each path's tokens in the last 24 hours against its daily budget (and,
for a paused path, when it frees room), and tokens and LLM calls per day and path.
/api/proactive?limit=&offset=: the last 24 hours' proactive messages by path and status, those
held back by reason, and the messages themselves, newest first.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from chalie.background.governor import WINDOW_S
from chalie.edge.api_spec import COOKIE_AUTH, OFFSET, Operation, Param, limit_param
from chalie.edge.rest_base import ApiError, AuthedHandler
from chalie.store import proactive_rows


class PathBudget(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A path's tokens in the last 24 hours against its budget (null: not governed)."""

    tokens_24h: int
    tokens_per_day: int | None
    paused: bool
    frees_at: float | None  # when a paused path has room again


class DaySpend(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    day: str  # YYYY-MM-DD, UTC
    path: str
    tokens: int
    llm_calls: int


class Spending(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    paths: dict[str, PathBudget]
    by_day: list[DaySpend]  # oldest first


class ProactiveSummary(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    by_path: dict[str, dict[str, int]]  # path -> status -> count
    held_back_by_reason: dict[str, int]


class ProactiveMessage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: int
    path: Literal["dmn", "goal", "scheduled"]
    ref: str | None
    channel: str
    content: str
    topic: str | None
    turn_id: str | None
    status: Literal["sent", "deferred", "dropped", "suppressed"]
    reason: str | None
    capped: bool
    composed_at: float
    delivered_at: float | None


class Proactive(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    last_24h: ProactiveSummary
    items: list[ProactiveMessage]  # newest first


class SpendingHandler(AuthedHandler):
    api = {"get": Operation(
        "Each background path's tokens against its budget, and spending per day",
        {200: Spending}, auth=(COOKIE_AUTH,), query=(Param(
            "days", {"type": "integer", "minimum": 1, "maximum": 366, "default": 7},
            "how many days of spending per day"),))}

    async def get(self) -> None:
        params = self.query_params("days")
        days = params.whole("days", default=7, lo=1, hi=366)
        governor = self.ctx.governor
        if governor is None:
            raise ApiError(503, "spending is not tracked on this server")
        since = self.ctx.clock.time() - days * WINDOW_S
        by_day = await self.off_loop(lambda: proactive_rows.spending_by_day(self.ctx.read(),
                                                                            since))
        self.write_json(msgspec.convert({"paths": governor.report(), "by_day": by_day},
                                        Spending))


class ProactiveHandler(AuthedHandler):
    api = {"get": Operation(
        "The last 24 hours' proactive messages, and those held back by reason",
        {200: Proactive}, auth=(COOKIE_AUTH,), query=(limit_param(50, 1000), OFFSET))}

    async def get(self) -> None:
        params = self.query_params("limit", "offset")
        limit = params.whole("limit", default=50, lo=1, hi=1000)
        offset = params.whole("offset", default=0, lo=0)
        since = self.ctx.clock.time() - WINDOW_S

        def read() -> Proactive:
            conn = self.ctx.read()
            return msgspec.convert({
                "last_24h": proactive_rows.summary(conn, since),
                "items": proactive_rows.recent(conn, limit=limit, offset=offset)}, Proactive)

        self.write_json(await self.off_loop(read))
