"""What the DMN thinks about, read from the store, and whether any of it is new.

An `idle` trigger looks at the recent weighty episodes; a `cadence` trigger at the top episodes,
the open loops and the goals; a `signal` trigger at what a `cadence` one does, and first at the
signals that woke it. Every trigger sees world state, who the person is, the Current State and
the last lines of their conversation. No recall runs before the DMN's loop: it has its tools.

The fingerprint sums up everything a trigger could think about: how many episodes there are
and the newest, the newest salient signal in world state (one sent with an activation energy
of at least dmn.signal_wake: a signal under it never makes a thought new), every goal's state,
the open loops. When it is the same as at the DMN's last thought, nothing changed, and the
trigger makes no LLM call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import apsw
import msgspec

from chalie.memory.context import identity_text, world_text
from chalie.memory.redact import Redactor
from chalie.prompts import Prompts
from chalie.store import goal_rows, memory_queries, proactive_rows, queries
from chalie.values.signals import Signal
from chalie.world.signals import Salient

NO_ACTION = "NOTHING"  # the DMN's answer for "no message": prompts/dmn.md says so
EPISODES = 8
IDLE_LOOKBACK_S = 7 * 86_400.0
RECENCY_DAYS = 30.0  # a cadence trigger weighs an episode this many days old half as much
LOOPS = 10
GOALS = 10
HISTORY_LINES = 10
TEXT_CHARS = 400
HISTORY_CHARS = 1000  # of one line of the conversation, as the DMN sees it
_decode_list = msgspec.json.Decoder(list[str]).decode


class Inputs(msgspec.Struct, frozen=True):
    """A trigger's material, rendered for prompts/dmn.md, and its fingerprint."""

    fingerprint: str
    empty: bool  # nothing at all to think about
    identity: str
    state: str
    world: str
    history: tuple[queries.HistoryLine, ...]
    episodes: str
    loops: str
    goals: str
    woke: str = ""  # a `signal` trigger's: the signals that woke it, fenced
    person_texts: tuple[str, ...] = ()  # whose words it shows (chalie/act/provenance.py)
    program_texts: tuple[str, ...] = ()


def read(conn: apsw.Connection, prompts: Prompts, *, trigger: str, channel: str, now: float,
         signals: Sequence[Signal], world: Sequence[Salient], wake: float = 0.0,
         woke: Sequence[Salient] = ()) -> Inputs:
    """Everything a trigger needs, in one read. `signals`: world state as held now; `world`:
    its most salient few, for the prompt; `wake`: dmn.signal_wake; `woke`: the signals that
    woke a `signal` trigger."""
    f = prompts.fragment
    redact = Redactor(memory_queries.forgotten(conn))
    count, newest = _episode_marks(conn)
    loops = proactive_rows.open_loops(conn, LOOPS)
    goals = goal_rows.listing(conn, state=None, limit=GOALS, offset=0)
    active_goals = [g for g in goals if g.state in goal_rows.ACTIVE]
    salient = [s for s in signals if s.activation_energy >= wake]
    newest_signal = max((s.received_at for s in salient), default=0.0)
    marks = (f"episodes {count}/{newest}|signal {newest_signal:.6f}|goals "
             f"{goal_rows.fingerprint(conn)}|loops {proactive_rows.loop_marks(conn)}")
    fingerprint = hashlib.sha256(marks.encode()).hexdigest()[:16]
    broad = trigger != "idle"  # cadence and signal look at everything
    episodes = _episodes(conn, trigger, now)
    episode_loops = [loop for row in episodes for loop in row[3]] if broad else []
    checkpoint = queries.latest_checkpoint(conn, channel)
    history = queries.recent_transcript(
        conn, channel, HISTORY_LINES, after_id=checkpoint.upto_transcript_id if checkpoint else 0)
    loop_lines = [f("dmn_loop", id=str(i), date=_date(at), text=_clip(redact(t, at)))
                  for i, t, at in loops]
    loop_lines += [f("dmn_episode_loop", text=_clip(redact(t))) for t in episode_loops]
    goal_lines = [f("dmn_goal", id=g.id, state=g.state, goal=_clip(g.goal))
                  for g in (goals if broad else active_goals)]
    identity = identity_text(conn, prompts)
    return Inputs(
        fingerprint=fingerprint,
        empty=count == 0 and not loops and not goals and not salient,
        identity=identity,
        state=redact(checkpoint.text, checkpoint.created_at) if checkpoint else "",
        world=world_text(prompts, world),
        history=tuple(msgspec.structs.replace(h, text=_clip(redact(h.text, h.created_at),
                                                            HISTORY_CHARS))
                      for h in history),
        episodes="\n".join(f("memory_episode", date=_date(at), text=_clip(redact(text, at)))
                           for text, at, _, _ in episodes),
        loops="\n".join(loop_lines) or f("dmn_none"),
        goals="\n".join(goal_lines) or f("dmn_none"),
        woke=world_text(prompts, woke),
        person_texts=(identity, *(h.text for h in history if h.role == "user")),
        program_texts=(*(h.text for h in history if h.role == "program"),
                       *(" ".join((s.signal.source, s.signal.topic or "", s.signal.content))
                         for s in (*world, *woke))),
    )


def is_no_action(text: str) -> bool:
    """The DMN's answer says NOTHING: empty, the token alone (quoted, in bold or code, with
    end punctuation), or the token then a reason after a separator ("NOTHING - all quiet",
    "NOTHING: asleep", "NOTHING (nothing new)", or on the next line). "NOTHING to report, but
    your parcel arrives today" is a message: it goes on in words."""
    cleaned = text.strip().strip(_MARKS).strip()
    if not cleaned:
        return True
    if not cleaned.startswith(NO_ACTION):
        return False
    rest = cleaned[len(NO_ACTION):].lstrip(_MARKS + " ")
    return not rest.strip(".!") or rest.startswith(_SEPARATORS)


_MARKS = "`*_\"'\u201c\u201d"  # quotes, bold, code around the token
_SEPARATORS = (".", ":", ";", "-", "\u2013", "\u2014", "(", "\n")  # before a reason


def _episode_marks(conn: apsw.Connection) -> tuple[int, int]:
    row = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM episodes").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _episodes(conn: apsw.Connection, trigger: str,
              now: float) -> list[tuple[str, float, float, list[str]]]:
    """(text, happened_at, salience, open loops) of the episodes a trigger looks at: `idle`,
    the week's most salient; `cadence` and `signal`, the most salient weighed by recency."""
    rows: list[Any]
    if trigger == "idle":
        rows = conn.execute(
            "SELECT gist, outcome, happened_at, salience, open_loops FROM episodes "
            "WHERE happened_at > ? ORDER BY salience DESC, happened_at DESC LIMIT ?",
            (now - IDLE_LOOKBACK_S, EPISODES)).fetchall()
    else:
        recent: list[Any] = conn.execute(
            "SELECT gist, outcome, happened_at, salience, open_loops FROM episodes "
            "ORDER BY id DESC LIMIT 200").fetchall()
        rows = sorted(recent, key=lambda r: float(r[3]) / (
            1 + max(0.0, now - float(r[2])) / 86_400.0 / RECENCY_DAYS), reverse=True)[:EPISODES]
    out: list[tuple[str, float, float, list[str]]] = []
    for row in rows:
        gist, outcome, at, salience, loops = (str(v) for v in row)
        out.append((f"{gist} ({outcome})" if outcome else gist, float(at), float(salience),
                    _decode_list(loops)))
    return out


def _date(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _clip(text: str, limit: int = TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"
