"""GET /api/state: where a channel's conversation stands, as Chalie tracks it (chalie/cognition):
the current topic and focus, the phase, the last turn's confidence and mode, the situation
model, the channel's recent topics with their feeling of knowing, the person's adaptive
traits (chalie/cognition/traits.py: their scores and evidence, decayed to now), the concepts
that the latest talk activates (spreading from the most recently seen ones, as the DMN's
activation does from its seeds) and the channel's unexpired drift gists."""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.cognition import concepts, traits
from chalie.cognition.confidence import Mode
from chalie.cognition.mind import Mind
from chalie.cognition.signals import Phase
from chalie.cognition.situation import Situation
from chalie.config import CHANNEL_RE
from chalie.edge.api_spec import COOKIE_AUTH, Operation, Param
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.store import cognition_rows, concept_rows, trait_rows

RECENT_SEEDS = 3  # the concepts of the latest talk that activation spreads from, for the view


class TopicNow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    name: str | None
    streak: int  # exchanges on it in a row


class Focus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    name: str | None


class ActiveConcept(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: int
    name: str
    activation: float
    seed: str | None  # the seed strategy that chose it; null when activation reached it


class TopicSeen(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    name: str
    messages: int
    fok: float  # feeling of knowing
    created_at: float
    last_seen: float


class TraitNow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    value: dict[str, float]  # scores, decayed to now
    weight: float  # evidence


class ChannelState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    channel: str
    topic: TopicNow | None
    focus: Focus | None
    phase: Phase | None
    exchanges: int
    confidence: float | None  # the last turn's
    mode: Mode | None
    last_message_at: float | None
    situation: Situation
    concepts: list[ActiveConcept]
    gists: list[str]  # unexpired drift gists, newest first
    summary: str | None
    topics: list[TopicSeen]
    traits: list[TraitNow]
    learned: list[str]  # what the identity section says of the traits


_CHANNEL = Param("channel", {"type": "string", "pattern": CHANNEL_RE.pattern, "default": "main"},
                 "the channel")
_TOPICS = Param("topics", {"type": "integer", "minimum": 0, "maximum": 100, "default": 10},
                "how many recent topics")


class StateHandler(AuthedHandler):
    api = {"get": Operation("Where a channel's conversation stands, as Chalie tracks it",
                            {200: ChannelState}, auth=(COOKIE_AUTH,), query=(_CHANNEL, _TOPICS))}

    async def get(self) -> None:
        params = self.query_params("channel", "topics")
        channel = params.text("channel", max_chars=64) or "main"
        if not CHANNEL_RE.match(channel):
            raise ApiError(400, f"channel: 1-64 letters, digits, '_', '.' or '-', "
                                f"got {shown(channel)}")
        limit = params.whole("topics", default=10, lo=0, hi=100)

        def read() -> ChannelState:
            conn = self.ctx.read()
            mind = Mind.load(conn, channel)
            now = self.ctx.clock.time()
            stored = trait_rows.load(conn)
            learned = [(name, traits.decayed(t, now)) for name, t in stored.items()]
            nodes, links = concept_rows.graph(conn)
            recent = sorted(nodes, key=lambda c: (-c.last_seen, c.id))[:RECENT_SEEDS]
            activated = concepts.spread(nodes, links, [(c, "recent") for c in recent], now=now)
            state: dict[str, Any] = {
                "channel": channel, **mind.snapshot(),
                "concepts": [{"id": a.id, "name": a.name, "activation": round(a.activation, 4),
                              "seed": a.seed} for a in activated],
                "gists": concept_rows.gists(conn, channel, now),
                "summary": cognition_rows.summary(conn, channel) or None,
                "topics": cognition_rows.recent_topics(conn, channel, limit),
                "traits": [{"name": name, "value": {k: round(v, 3) for k, v in t.value.items()},
                            "weight": round(t.weight, 3)} for name, t in learned],
                "learned": traits.describe(stored, self.ctx.prompts, now)
                if self.ctx.prompts is not None else []}
            return msgspec.convert(state, ChannelState)

        self.write_json(await self.off_loop(read))
