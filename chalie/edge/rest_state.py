"""GET /api/state: where a channel's conversation stands, as Chalie tracks it (chalie/cognition):
the current topic and focus, the phase, the last turn's confidence and mode, the situation
model, the channel's recent topics with their feeling of knowing, the person's adaptive
traits (chalie/cognition/traits.py: their scores and evidence, decayed to now), the concepts
that the latest talk activates (spreading from the most recently seen ones, as the DMN's
activation does from its seeds) and the channel's unexpired drift gists."""

from __future__ import annotations

from typing import Any

from chalie.cognition import concepts, traits
from chalie.cognition.mind import Mind
from chalie.config import CHANNEL_RE
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.store import cognition_rows, concept_rows, trait_rows

RECENT_SEEDS = 3  # the concepts of the latest talk that activation spreads from, for the view


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
            now = self.ctx.clock.time()
            stored = trait_rows.load(conn)
            learned = [(name, traits.decayed(t, now)) for name, t in stored.items()]
            nodes, links = concept_rows.graph(conn)
            recent = sorted(nodes, key=lambda c: (-c.last_seen, c.id))[:RECENT_SEEDS]
            activated = concepts.spread(nodes, links, [(c, "recent") for c in recent], now=now)
            return {"channel": channel, **mind.snapshot(),
                    "concepts": [{"id": a.id, "name": a.name,
                                  "activation": round(a.activation, 4), "seed": a.seed}
                                 for a in activated],
                    "gists": concept_rows.gists(conn, channel, now),
                    "summary": cognition_rows.summary(conn, channel) or None,
                    "topics": cognition_rows.recent_topics(conn, channel, limit),
                    "traits": [{"name": name, "value": {k: round(v, 3)
                                                        for k, v in t.value.items()},
                                "weight": round(t.weight, 3)} for name, t in learned],
                    "learned": traits.describe(stored, self.ctx.prompts, now)
                    if self.ctx.prompts is not None else []}

        self.write_json(await self.off_loop(read))
