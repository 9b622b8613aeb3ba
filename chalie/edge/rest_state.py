"""GET /api/state: where a channel's conversation stands, as Chalie tracks it (chalie/cognition):
the current topic and focus, the phase, the last turn's confidence and mode, the situation
model, and the channel's recent topics with their feeling of knowing."""

from __future__ import annotations

from typing import Any

from chalie.cognition.mind import Mind
from chalie.config import CHANNEL_RE
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.store import cognition_rows


class StateHandler(AuthedHandler):
    async def get(self) -> None:
        params = self.query_params("channel", "topics")
        channel = params.text("channel", max_chars=64) or "main"
        if not CHANNEL_RE.match(channel):
            raise ApiError(400, f"channel: 1-64 letters, digits, '_', '.' or '-', "
                                f"got {shown(channel)}")
        limit = params.whole("topics", default=10, lo=0, hi=100)

        def read() -> dict[str, Any]:
            conn = self.ctx.read()
            mind = Mind.load(conn, channel)
            return {"channel": channel, **mind.snapshot(),
                    "topics": cognition_rows.recent_topics(conn, channel, limit)}

        self.write_json(await self.off_loop(read))
