"""A Session's cognition: the channel's Mind, and what each person's turn adds to it.

Before the loop: a short social message is answered without the model; a long silence since
the channel's last message has the tail of the conversation encoded at once; the message's
topic is chosen on the pool beside recall (with recall's own embedding of it). As the turn
closes: its topic, confidence and mode for the `message` frame. After it is stored and its
answer is out: the post-turn fan-out, in order, each step isolated (one that fails is logged
and the next still runs): conversation phase, situation model, adaptive signals, the DMN's
idle reset, counters, the compaction backstop; then the Mind is saved. The adaptive traits
(the person's, one set for every channel: chalie/cognition/traits.py) learn from each exchange
in the fan-out, are saved with the Mind, and their lines join the next prompt's identity
section.

Background paths have no Session and skip all of this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo

import apsw
import structlog

from chalie.actors.encoder_messages import EncodeTail
from chalie.actors.session_deps import SessionDeps
from chalie.actors.store_writer_messages import ApplyOps
from chalie.actors.turn import Turn
from chalie.background.attention import resolve_zone
from chalie.cognition import signals, topics, traits
from chalie.cognition.mind import Mind, Verdict, judge, track_phase, track_situation
from chalie.cognition.topics import TopicChoice
from chalie.config import CognitionConfig
from chalie.memory.context import TurnContext
from chalie.store import queries, trait_rows
from chalie.store.background_ops import Op, SaveMind, SaveTraits, TopicSeen
from chalie.values.cognition import Trait

log = structlog.get_logger("chalie.session")


@dataclass
class TurnCognition:
    """What a person's turn learned for its cognition, kept on the Turn."""

    social: bool = False
    choice: TopicChoice | None = None
    recalled_texts: tuple[str, ...] = ()
    history_messages: int = 0
    worlds: int = 0
    memory_fill: float = 0.0  # the share of the memory section's budget recall filled
    vector: bytes | None = None  # the message's embedding (recall's), for the topic centroid
    verdict: Verdict | None = None
    answer: str | None = None  # the turn's answer: the adaptive traits read the reply to it
    ops: list[Op] = field(default_factory=list)


class ChannelCognition:
    def __init__(self, channel: str, deps: SessionDeps) -> None:
        self.channel = channel
        self._deps = deps
        self.settings: CognitionConfig | None = deps.cognition
        self.mind = Mind(channel)
        self.traits: dict[str, Trait] = {}
        self._last_answer: str | None = None  # the answer the person's next message replies to
        self._zone: tzinfo | None = resolve_zone(deps.timezone)[0]

    def load(self, conn: apsw.Connection) -> None:
        try:
            self.mind = Mind.load(conn, self.channel)
        except apsw.Error:
            log.exception("mind_not_loaded", channel=self.channel)
        try:
            self.traits = trait_rows.load(conn)
        except apsw.Error:
            log.exception("traits_not_loaded")
        # A Session restarted (after idling, or a crash): the answer the next message replies to.
        try:
            last = queries.recent_transcript(conn, self.channel, 1)
        except apsw.Error:
            log.exception("last_answer_not_loaded")
            last = []
        if last and last[0].role == "assistant":
            self._last_answer = last[0].text

    def trait_lines(self) -> tuple[str, ...]:
        """The adaptive traits with enough evidence, as the identity section says them."""
        return tuple(traits.describe(self.traits, self._deps.prompts, self._deps.clock.time()))

    # -- before the loop --

    def social_reply(self, text: str) -> str | None:
        """The deterministic acknowledgement of a short social message, or None."""
        s = self.settings
        if s is None or not signals.is_social(text, s.social_phrases, s.social_max_chars):
            return None
        return signals.social_reply(text)

    def message_arrived(self, now: float) -> None:
        """A person's message: after a silence over cognition.silence_gap_s, the conversation
        before it is encoded into episodes now rather than when enough has piled up."""
        s, last = self.settings, self.mind.last_message_at
        if s is None or last is None or now - last <= s.silence_gap_s:
            return
        log.info("silence_gap", channel=self.channel, silent_s=round(now - last))
        self._deps.directory.tell("encoder", EncodeTail(self.channel))

    def topic_job(self, text: str) -> Callable[[apsw.Connection, TurnContext],
                                                TopicChoice | None]:
        """What the context job runs after recall (on the pool): the message's topic."""
        s = self.settings
        current = self.mind.topic_id
        space_id = self._deps.recall.space_id
        semantic = self._deps.recall.semantic  # a lexical embedder's vectors are not compared

        def choose(conn: apsw.Connection, ctx: TurnContext) -> TopicChoice | None:
            if s is None:
                return None
            try:
                return topics.choose(conn, channel=self.channel, text=text, vector=ctx.vector,
                                     space_id=space_id, threshold=s.topic_threshold,
                                     cosine_threshold=s.topic_cosine if semantic else None,
                                     recent=s.recent_topics, current_id=current,
                                     leans_back=signals.nlp_signals(text).implicit_reference)
            except apsw.Error:
                log.exception("topic_not_chosen")
                return None

        return choose

    # -- the turn closes --

    def close(self, turn: Turn, answer: str | None, *, cancelled: bool) -> Verdict:
        """The turn's topic, confidence and mode (a cancelled turn only acknowledges); the
        topic's row is written with the turn."""
        c: TurnCognition = turn.cognition or TurnCognition()
        tools_called = sum(turn.loop.metrics().tools.values())
        verdict = judge(c.choice, social=c.social or cancelled, tools_called=tools_called,
                        answer=answer, recalled_texts=c.recalled_texts,
                        density=c.memory_fill,
                        history_messages=c.history_messages, worlds=c.worlds)
        c.verdict = verdict
        c.answer = answer
        if c.choice is not None and verdict.fok is not None:
            choice = c.choice
            c.ops.append(TopicSeen(choice.id, self.channel, choice.name, choice.new,
                                   choice.keywords, c.vector, self._deps.recall.space_id,
                                   verdict.fok))
        turn.cognition = c
        return verdict

    # -- after the answer is out --

    def fan_out(self, turn_cog: TurnCognition | None, text: str, used_tools: bool,
                steps: list[tuple[str, Callable[[], None]]]) -> None:
        """The post-turn fan-out of a person's turn, in order: phase, situation, adaptive
        signals, then the Session's `steps` (the DMN's idle reset; the compaction backstop)
        with the counters between them, then the Mind and the traits are saved."""
        c = turn_cog or TurnCognition()
        now = self._deps.clock.time()
        said: list[signals.NlpSignals] = []  # the message's signals, read once

        def signals_of_text() -> signals.NlpSignals:
            if not said:
                said.append(signals.nlp_signals(text))
            return said[0]

        def phase() -> None:
            verdict = c.verdict or judge(None, social=c.social, tools_called=0, answer=None,
                                         recalled_texts=(), density=0.0, history_messages=0,
                                         worlds=0)
            focus_after = self.settings.focus_after if self.settings else 3
            track_phase(self.mind, choice=c.choice, verdict=verdict, signals=signals_of_text(),
                        used_tools=used_tools, at=now, focus_after=focus_after)

        def situation() -> None:
            track_situation(self.mind, text)

        def adaptive_signals() -> None:
            previous = self._last_answer
            if not c.social:  # "You're welcome." is not the answer the next message weighs
                self._last_answer = c.answer
            self.traits = traits.learn(self.traits, text=text, previous_answer=previous,
                                       now=now, tz=self._zone, said=signals_of_text())

        def counters() -> None:
            metrics = self._deps.metrics
            if c.verdict is not None:
                metrics.person_turns.labels(mode=c.verdict.mode).inc()
            if c.choice is not None and c.choice.new:
                metrics.topics_started.inc()

        def save() -> None:
            self._deps.directory.tell("store_writer",
                                      ApplyOps((SaveMind(self.channel, self.mind.values()),
                                                SaveTraits(dict(self.traits)))))

        for name, step in (("phase", phase), ("situation", situation),
                           ("adaptive_signals", adaptive_signals), *steps[:1],
                           ("counters", counters), *steps[1:], ("save_mind", save)):
            try:
                step()
            except Exception:  # one failing step never stops the others or the next turn
                log.exception("fan_out_step_failed", step=name)
                self._deps.metrics.fan_out_failures.labels(step=name).inc()

