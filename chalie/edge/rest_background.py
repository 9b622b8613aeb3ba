"""What the background paths cost and said: GET /api/spending, GET /api/proactive.

/api/spending?days=7: each path's tokens in the last 24 hours against its daily budget (and,
for a paused path, when it frees room), and tokens and LLM calls per day and path.
/api/proactive?limit=&offset=: the last 24 hours' proactive messages by path and status, those
held back by reason, and the messages themselves, newest first.
"""

from __future__ import annotations

from typing import Any

from chalie.background.governor import WINDOW_S
from chalie.edge.rest_base import ApiError, AuthedHandler
from chalie.store import proactive_rows


class SpendingHandler(AuthedHandler):
    async def get(self) -> None:
        params = self.query_params("days")
        days = params.whole("days", default=7, lo=1, hi=366)
        governor = self.ctx.governor
        if governor is None:
            raise ApiError(503, "spending is not tracked on this server")
        since = self.ctx.clock.time() - days * WINDOW_S
        by_day = await self.off_loop(lambda: proactive_rows.spending_by_day(self.ctx.read(),
                                                                            since))
        self.write_json({"paths": governor.report(), "by_day": by_day})


class ProactiveHandler(AuthedHandler):
    async def get(self) -> None:
        params = self.query_params("limit", "offset")
        limit = params.whole("limit", default=50, lo=1, hi=1000)
        offset = params.whole("offset", default=0, lo=0)
        since = self.ctx.clock.time() - WINDOW_S

        def read() -> dict[str, Any]:
            conn = self.ctx.read()
            return {"last_24h": proactive_rows.summary(conn, since),
                    "items": proactive_rows.recent(conn, limit=limit, offset=offset)}

        self.write_json(await self.off_loop(read))
