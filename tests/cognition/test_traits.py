"""Adaptive traits learned from scripted exchanges, with injected times and zones."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from chalie.cognition import traits
from chalie.cognition.traits import learn
from chalie.prompts import Prompts
from chalie.store import db, trait_rows
from chalie.store.background_ops import SaveTraits, apply
from chalie.values.cognition import Trait

LONDON = ZoneInfo("Europe/London")
PROMPTS = Prompts.load()
DAY = 86_400.0
T0 = datetime(2026, 3, 2, 9, 15, tzinfo=UTC).timestamp()  # a Monday, 09:15 in London (GMT)
SHORT = "Paris."
LONG = " ".join(["word"] * 200)


def describe(learned: dict[str, Trait], now: float | None = None) -> list[str]:
    return traits.describe(learned, PROMPTS, now)


def run(exchanges: list[tuple[str, str | None, float]], start: dict[str, Trait] | None = None,
        tz: ZoneInfo | None = LONDON) -> dict[str, Trait]:
    learned = dict(start or {})
    for text, previous, at in exchanges:
        learned = learn(learned, text=text, previous_answer=previous, now=at, tz=tz)
    return learned


def test_asking_for_shorter_answers_makes_it_a_trait_at_once() -> None:
    """One explicit "please keep it shorter" is enough for the identity section to say so."""
    learned = run([("Please keep it shorter", LONG, T0)])
    assert "Prefers short answers." in describe(learned, T0)
    assert traits.preferred_length(learned) == "short"


def test_the_latest_explicit_request_outweighs_an_older_opposite_one() -> None:
    """Asking for more detail after asking for brevity turns the preference around."""
    learned = run([("too long", LONG, T0), ("more detail please", SHORT, T0 + 60)])
    assert traits.preferred_length(learned) == "long"
    assert "Prefers long, detailed answers." in describe(learned, T0 + 60)


def test_follow_ups_are_weak_evidence_that_needs_repeating() -> None:
    """A curt reply to a long answer hints that it was too much; one hint says nothing, several
    say medium length."""
    one = run([("ok", LONG, T0)])
    assert traits.preferred_length(one) is None
    assert describe(one, T0) == []
    many = run([("ok", LONG, T0 + i * 600) for i in range(5)])
    assert many["answer_length"].value == {"medium": pytest.approx(1.25, abs=0.01)}
    assert traits.preferred_length(many) == "medium"


def test_a_question_leaning_on_a_short_answer_asks_for_more() -> None:
    learned = run([("why is that?", SHORT, T0 + i * 600) for i in range(4)])
    assert learned["answer_length"].value.keys() == {"medium"}
    assert "Prefers answers of medium length." in describe(learned, T0 + 3000)


def test_praise_approves_the_length_of_the_answer_it_praises() -> None:
    learned = run([("Thanks, perfect", LONG, T0 + i * 600) for i in range(4)])
    assert learned["answer_length"].value.keys() == {"long"}


def test_evidence_halves_every_half_life_and_old_evidence_falls_under_the_threshold() -> None:
    learned = run([("keep it short", LONG, T0)])
    half = traits.decayed(learned["answer_length"], T0 + traits.HALF_LIFE_DAYS * DAY)
    assert half.value["short"] == pytest.approx(0.5)
    assert half.weight == pytest.approx(0.5)
    assert "Prefers short answers." in describe(learned, T0 + DAY)
    assert describe(learned, T0 + traits.HALF_LIFE_DAYS * DAY) == []


def test_active_hours_are_the_local_hours_of_most_messages() -> None:
    """Mornings 08-10 and evenings 19-22 in London over two weeks; a stray 3 am message does not
    make 3 am a usual hour."""
    day0 = datetime(2026, 3, 2, tzinfo=LONDON)
    script = []
    for d in range(14):
        for hour in (8, 9, 19, 20, 21):
            at = day0.replace(day=2 + d, hour=hour, minute=30).timestamp()
            script.append(("hello there", None, at))
    script.append(("cannot sleep", None, day0.replace(day=16, hour=3).timestamp()))
    learned = run(script)
    assert learned["active_hours"].value.keys() == {"3", "8", "9", "19", "20", "21"}
    assert traits.usual_hours(learned) == frozenset({8, 9, 19, 20, 21})
    assert "Usually active 08:00-10:00 and 19:00-22:00." in describe(learned)


def test_hours_are_counted_in_the_given_zone_and_not_without_one() -> None:
    at = datetime(2026, 7, 1, 23, 30, tzinfo=UTC).timestamp()  # 08:30 in Tokyo
    assert run([("hi", None, at)], tz=ZoneInfo("Asia/Tokyo"))["active_hours"].value == {"8": 1.0}
    assert "active_hours" not in run([("hi", None, at)], tz=None)


def test_few_messages_or_no_pattern_say_nothing_about_hours() -> None:
    few = run([("hi", None, T0 + i * 3600) for i in range(5)])
    assert traits.usual_hours(few) is None
    everywhere = run([("hi", None, T0 + i * 3600) for i in range(48)])
    assert traits.usual_hours(everywhere) is None
    assert not any(line.startswith("Usually active") for line in describe(everywhere))


def test_hour_spans_join_runs_across_midnight() -> None:
    assert traits.hour_spans(frozenset({22, 23, 0, 1, 12})) == ["12:00-13:00", "22:00-02:00"]


@pytest.mark.parametrize(("text", "lang"), [
    ("Bonjour, je voudrais savoir si tu peux m'aider avec mon jardin", "fr"),
    ("What is the weather like in the city today?", "en"),
    ("Wie ist das Wetter heute in der Stadt? Ich möchte es für morgen wissen", "de"),
    ("¿Qué tiempo hace hoy en la ciudad? Gracias", "es"),
    ("Come stai oggi? Io sono molto stanco", "it"),
    ("Como você está hoje? Eu estou muito cansado", "pt"),
    ("Hoe is het weer vandaag in de stad?", "nl"),
    ("ok", "unknown"),
    ("Lisbon Porto Madrid", "unknown"),
])
def test_the_language_guess_reads_stopwords(text: str, lang: str) -> None:
    assert traits.guess_language(text) == lang


def test_the_language_they_mostly_write_in_is_a_trait() -> None:
    french = ["Je voudrais réserver une table pour ce soir",
              "Est-ce que tu peux me rappeler demain?",
              "Merci, c'est parfait pour moi"]
    learned = run([(t, None, T0 + i * 60) for i, t in enumerate(french)])
    assert learned["language"].value == {"fr": pytest.approx(3.0, abs=0.001)}
    assert "Writes in French." in describe(learned)
    assert not any(line.startswith("Writes in") for line in describe(run([(french[0], None, T0)])))


@pytest.mark.parametrize(("text", "tone"), [
    ("hey what's up lol", "casual"),
    ("that's awesome!! 🎉", "casual"),
    ("Dear Chalie, would you kindly summarise the report. Regards", "formal"),
    ("Could you please send me the agenda? Thank you", "formal"),
    ("The meeting is at noon", None),
])
def test_the_tone_guess(text: str, tone: str | None) -> None:
    assert traits.guess_tone(text) == tone


def test_a_casual_writer_is_described_as_casual_and_a_mixed_one_not_at_all() -> None:
    casual = run([("hey what's up", None, T0 + i) for i in range(3)])
    assert "Writes casually." in describe(casual)
    mixed = run([("hey what's up", None, T0), ("Dear Sir, kindly advise", None, T0 + 1),
                 ("yo lol", None, T0 + 2), ("Please would you kindly reply", None, T0 + 3)])
    assert not any(line.startswith("Writes ") and "ly." in line for line in describe(mixed))


def test_next_usual_hour_is_when_a_quiet_moment_would_wait_for() -> None:
    day0 = datetime(2026, 3, 2, tzinfo=LONDON)
    script = [("hi", None, day0.replace(day=2 + d, hour=h).timestamp())
              for d in range(10) for h in (8, 9)]
    learned = run(script)
    at = day0.replace(day=20, hour=14, minute=20).timestamp()
    assert traits.next_usual_hour(learned, at, LONDON) == \
        day0.replace(day=21, hour=8).timestamp()
    assert traits.next_usual_hour(learned, day0.replace(day=20, hour=8, minute=40).timestamp(),
                                  LONDON) is None
    assert traits.next_usual_hour({}, at, LONDON) is None


def test_traits_are_stored_and_read_back(tmp_path: Path) -> None:
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    learned = run([("Please keep it shorter", LONG, T0), ("hey thx!", None, T0 + 5)])
    with conn:
        apply(conn, [SaveTraits(learned)], turn_id=None, now=T0 + 5)
    assert trait_rows.load(conn) == learned
