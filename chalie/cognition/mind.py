"""Where one channel's conversation stands: its topic and streak, focus, phase, the last turn's
confidence and mode, and the situation model. The channel's Session owns one `Mind`, loads it
from the store when it starts and has the StoreWriter save it after every turn.

`judge` runs as a turn closes (its `message` frame carries the topic, confidence and mode);
`track_phase` and `track_situation` are the post-turn fan-out's first steps, once the answer
is out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, get_args

import apsw
import msgspec

from chalie.cognition import confidence as conf
from chalie.cognition.signals import NlpSignals, Phase, next_phase
from chalie.cognition.situation import Situation, update
from chalie.cognition.topics import TopicChoice
from chalie.prompts import Prompts
from chalie.store import cognition_rows


@dataclass(frozen=True)
class Verdict:
    """How a turn went, as its `message` frame and the next prompt say it."""

    topic: str | None
    confidence: float | None
    mode: conf.Mode
    fok: float | None  # the topic's feeling of knowing after the turn


@dataclass
class Mind:
    channel: str
    topic_id: str | None = None
    topic_name: str | None = None
    streak: int = 0
    focus_id: str | None = None
    focus_name: str | None = None
    phase: Phase | None = None
    exchanges: int = 0
    confidence: float | None = None
    mode: str | None = None
    last_message_at: float | None = None
    situation: Situation = field(default_factory=Situation)

    @classmethod
    def load(cls, conn: apsw.Connection, channel: str) -> Mind:
        row = cognition_rows.load_state(conn, channel)
        if row is None:
            return cls(channel)
        names = cognition_rows.topic_names(
            conn, [i for i in (row["topic_id"], row["focus_id"]) if i])
        try:
            situation = msgspec.json.decode(row["situation"], type=Situation)
        except msgspec.DecodeError:
            situation = Situation()
        return cls(
            channel, topic_id=row["topic_id"], topic_name=names.get(row["topic_id"], (None,))[0],
            streak=int(row["streak"]), focus_id=row["focus_id"],
            focus_name=names.get(row["focus_id"], (None,))[0], phase=row["phase"],
            exchanges=int(row["exchanges"]), confidence=row["confidence"], mode=row["mode"],
            last_message_at=row["last_message_at"], situation=situation,
        )

    def values(self) -> dict[str, Any]:
        """The channel_state row (SaveMind)."""
        return {"topic_id": self.topic_id, "streak": self.streak, "focus_id": self.focus_id,
                "phase": self.phase or "opening", "exchanges": self.exchanges,
                "confidence": self.confidence, "mode": self.mode,
                "last_message_at": self.last_message_at,
                "situation": msgspec.json.encode(self.situation).decode()}

    def state_text(self, prompts: Prompts, summary: str = "") -> str:
        """The conversation's part of the next prompt's state section ("" before any turn);
        `summary` is the situation model's summarised part (from the encoder)."""
        f = prompts.fragment
        lines = [f("situation_summary", text=summary)] if summary else []
        if self.topic_name:
            lines.append(f("conversation_topic", topic=self.topic_name, streak=self.streak))
        if self.focus_name:
            lines.append(f("conversation_focus", focus=self.focus_name))
        if self.phase:
            lines.append(f("conversation_phase", phase=self.phase))
        if self.confidence is not None and self.mode in get_args(conf.Mode):
            lines.append(f("conversation_confidence", confidence=f"{self.confidence:.2f}",
                           mode=f(f"mode_{self.mode}")))
        s = self.situation
        for name, items in (("situation_loops", s.open_loops), ("situation_people", s.people),
                            ("situation_places", s.places),
                            ("situation_decisions", s.decisions)):
            if items:
                lines.append(f(name, items="; ".join(items)))
        return f("conversation_state", lines="\n".join(lines)) if lines else ""

    def copy(self) -> Mind:
        """A copy the pool can read while the actor goes on (the situation is replaced, never
        changed in place)."""
        return replace(self)

    def snapshot(self) -> dict[str, Any]:
        """What GET /api/state shows of it."""
        return {"topic": {"id": self.topic_id, "name": self.topic_name, "streak": self.streak}
                if self.topic_id else None,
                "focus": {"id": self.focus_id, "name": self.focus_name}
                if self.focus_id else None,
                "phase": self.phase, "exchanges": self.exchanges,
                "confidence": self.confidence, "mode": self.mode,
                "last_message_at": self.last_message_at,
                "situation": msgspec.to_builtins(self.situation)}


def judge(choice: TopicChoice | None, *, social: bool, tools_called: int, answer: str | None,
          recalled_texts: tuple[str, ...], density: float, history_messages: int,
          worlds: int) -> Verdict:
    """The turn's topic, confidence (memory confidence: 0.4·fok + 0.4·warmth + 0.2·density,
    times 0.7 on a new topic) and mode. A turn with no topic (a social one) has no confidence."""
    mode = conf.turn_mode(social=social, tools_called=tools_called, answer=answer)
    if choice is None:
        return Verdict(None, None, mode, None)
    used = answer is not None and conf.answer_used(answer, recalled_texts)
    fok = conf.update_fok(choice.fok, recalled=len(recalled_texts), used=used)
    confidence = conf.memory_confidence(
        fok, conf.warmth(history_messages, worlds), density,
        new_topic=choice.new)
    return Verdict(choice.name, confidence, mode, fok)


def track_phase(mind: Mind, *, choice: TopicChoice | None, verdict: Verdict,
                signals: NlpSignals, used_tools: bool, at: float, focus_after: int) -> None:
    """The fan-out's first step: the exchange counted, the topic's streak and the focus, the
    last turn's confidence and mode, and the conversation's phase."""
    mind.exchanges += 1
    mind.last_message_at = at
    mind.confidence, mind.mode = verdict.confidence, verdict.mode
    if choice is not None:
        if choice.id == mind.topic_id:
            mind.streak += 1
        else:
            mind.topic_id, mind.topic_name, mind.streak = choice.id, choice.name, 1
        if mind.streak >= focus_after:
            mind.focus_id, mind.focus_name = choice.id, choice.name
    mind.phase = next_phase(mind.phase, signals, exchanges=mind.exchanges, used_tools=used_tools,
                            new_topic=choice is not None and choice.new)


def track_situation(mind: Mind, text: str) -> None:
    """The fan-out's second step: the situation model after the person's message."""
    mind.situation = update(mind.situation, text, focus=mind.focus_name)
