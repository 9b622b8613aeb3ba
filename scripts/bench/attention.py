"""Attention: what Chalie's own thinking costs over a simulated day, and how soon it notices.

The real server runs in this process with its clock injected (a ManualClock), so a day passes
in seconds: the benchmark moves time from one due timer to the next and, after each step, waits
until the server has done what that moment asked of it (no LLM call out, no turn in flight,
the DMN holding no thought) before it moves on. Everything else is real: the SQLite store, the
actors, the HTTP and WebSocket edge on loopback, and a paired program (a stub interface on
loopback that follows the contract: it pairs without `signals` and declares its types in
/capabilities) that sends signals over REST. The LLM is a stub in process: the DMN answers a
`signal` trigger with a message naming the signals that woke it and NOTHING otherwise; the
person's turns get a short answer; structured requests (episode encodings) a minimal valid
answer.

The day runs from 08:00 to 22:00 UTC (outside the shipped quiet hours) with the shipped
[dmn] settings, except the time zone (UTC) and the daily cap (--daily-cap, so that every
thought worth sending reaches the person and its latency can be measured). Signals of mixed
salience arrive at random times, some in bursts; the person holds a few conversations of
several messages each.

Reported: LLM calls per DMN trigger; seconds from each salient signal to the `notification`
that names it (p50, p90, max); salient signals never thought about (goal 0: no DMN prompt
showed them); calls made for faint signals only (goal 0: a DMN call with no salient signal,
episode, goal or open loop new since the one before); thoughts that fired during a
conversation (goal 0: a DMN call while the person's turn ran or within dmn.busy_s of their
last message), and notifications delivered in one.

    .venv/bin/python scripts/bench/attention.py [--seed 7] [--signals 80] [--conversations 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _common
import httpx
from _common import emit, progress, summary

from chalie.clock import ManualClock
from chalie.config_load import load_config
from chalie.llm.types import ChatRequest, ChatResponse, TextSink, Usage
from chalie.server import Server
from chalie.store import db
from tests.conftest import write_config
from tests.integration.harness import Client, schema_filler
from tests.integration.stub_interface import StubInterface, bearer_client, pair

_common.quiet_logging()

DAY = datetime(2026, 11, 30, tzinfo=UTC).timestamp()  # a Monday, 00:00 UTC
START, END = DAY + 8 * 3600, DAY + 22 * 3600
WAKE = 0.7  # dmn.signal_wake as shipped
MARK = re.compile(r"S\d{3}")
SETTLE_TIMEOUT_S = 60.0
TYPES = ["closure", "weather", "delivery", "calendar", "stock"]


@dataclass
class Sent:
    """A signal the program sent: its mark (S000...), simulated arrival, activation energy."""

    mark: str
    at: float
    energy: float
    kind: str


@dataclass
class Call:
    """One request the stub LLM answered, at a simulated time."""

    at: float
    who: str  # dmn, person, structured
    trigger: str | None = None
    woke: list[str] = field(default_factory=list)  # marks in the "why" section
    seen: list[str] = field(default_factory=list)  # marks anywhere in the prompt
    store: tuple[int, ...] = ()  # episodes, open loops, goals: what else could be new


class StubModel:
    """The LLM, in process (the LlmProvider seam): it tells a DMN thought from a person's turn
    by its prompt, and records every call at the clock's time."""

    def __init__(self, clock: ManualClock, db_path: Path) -> None:
        self.clock = clock
        self.db_path = db_path
        self.calls: list[Call] = []
        self.lock = threading.Lock()
        self.out = 0

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        with self.lock:
            self.out += 1
        try:
            return self._answer(request)
        finally:
            with self.lock:
                self.out -= 1

    def _answer(self, request: ChatRequest) -> ChatResponse:
        at = self.clock.time()
        prompt = request.messages[-1].content if request.messages else ""
        if request.response_format is not None:
            self._record(Call(at, "structured"))
            return _response(json.dumps(schema_filler(request.response_format.schema)))
        if "# Why you are thinking now" not in prompt:
            self._record(Call(at, "person"))
            return _response("Noted.")
        why = prompt.split("# Why you are thinking now", 1)[1]
        trigger = ("signal" if "Paired programs just reported" in why else
                   "idle" if "has sent nothing since" in why else "cadence")
        woke = sorted(set(MARK.findall(why.split("# Your work so far", 1)[0])))
        self._record(Call(at, "dmn", trigger, woke, sorted(set(MARK.findall(prompt))),
                          self._store_marks()))
        if trigger == "signal" and woke:
            return _response("Heads-up: " + ", ".join(woke) + " may matter to your plans.")
        return _response("NOTHING")

    def _store_marks(self) -> tuple[int, ...]:
        conn = db.connect(self.db_path, busy_timeout_ms=5000, readonly=True)
        try:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM episodes), "
                "(SELECT count(*) FROM open_loops WHERE closed_at IS NULL), "
                "(SELECT count(*) || ':' || coalesce(max(updated_at), 0) FROM goals)").fetchone()
        finally:
            conn.close()
        return (int(row[0]), int(row[1]), hash(row[2]))

    def _record(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def close(self) -> None:
        pass


def _response(text: str) -> ChatResponse:
    return ChatResponse(text=text, tool_calls=(), usage=Usage(100, 10, 110),
                        finish_reason="stop", latency_s=0.0)


# --- the day ----------------------------------------------------------------------------------

def plan_day(rng: random.Random, signals: int, conversations: int,
             bursts: int) -> tuple[list[Sent], list[float]]:
    """Signals (some in bursts of 3-5 within 15 s) and the person's messages (conversations of
    3-6 messages 20-90 s apart), at random times between START and END."""
    times: list[float] = []
    while len(times) < signals:
        at = rng.uniform(START, END - 600)
        if len(times) < bursts * 4 and rng.random() < 0.5:
            times += [at + rng.uniform(0, 15) for _ in range(rng.randint(3, 5))]
        else:
            times.append(at)
    times = sorted(times[:signals])
    sent = []
    for n, at in enumerate(times):
        salient = rng.random() < 0.3
        energy = round(rng.uniform(WAKE, 1.0) if salient else rng.uniform(0.1, WAKE - 0.01), 2)
        sent.append(Sent(f"S{n:03d}", at, energy, rng.choice(TYPES)))
    messages: list[float] = []
    for _ in range(conversations):
        at = rng.uniform(START, END - 900)
        for _ in range(rng.randint(3, 6)):
            messages.append(at)
            at += rng.uniform(20, 90)
    return sent, sorted(messages)


class Day:
    """The in-process server, its clock, the program and the person's socket."""

    def __init__(self, workdir: Path, daily_cap: int) -> None:
        self.clock = ManualClock(start=1_000.0, wall=START - 3600)
        config_path = write_config(workdir, {
            "server": {"port": 0}, "store": {"path": str(workdir / "data")},
            "auth": {"password": "bench"}, "log": {"format": "json", "level": "warning"},
            "dmn": {"timezone": "UTC", "daily_cap": daily_cap},
            "memory": {"embedder": "hashed"}})
        self.config = load_config(config_path, env={})
        self.db_path = Path(self.config.store.path) / "chalie.db"
        self.model = StubModel(self.clock, self.db_path)
        self.server = Server(self.config, provider=self.model, clock=self.clock)
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the server did not start")
        self.url = f"http://127.0.0.1:{self.server.port}"

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self.server.start()
        self._ready.set()
        await self._stop.wait()
        await self.server.stop()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)

    def metric(self, name: str, **labels: str) -> float:
        return self.server.metrics.registry.get_sample_value(name, labels) or 0.0

    # -- time --

    def settle(self) -> None:
        """Wait until the server has done what the current moment asked: every actor that
        matters has handled its mailbox, no LLM call is out, no turn is in flight, and the
        DMN holds no thought; twice in a row, since one answer can start more work."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        quiet = 0
        while quiet < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not settle")
            busy = self._barrier()
            if busy or self.model.out or self.metric("chalie_turns_in_flight"):
                quiet = 0
                time.sleep(0.001)
            else:
                quiet += 1

    def _barrier(self) -> bool:
        """Ask each actor that matters something (its answer comes after what it was told
        before); True while the DMN holds a thought."""
        directory = self.server.directory
        for name in ("world", "store_writer", "encoder"):
            ref = directory.get(name)
            if ref is not None:
                ref.proxy().actor_urn.get(timeout=SETTLE_TIMEOUT_S)
        dmn = directory.get("dmn")
        return dmn is not None and dmn.proxy().busy.get(timeout=SETTLE_TIMEOUT_S) is not None

    def run_to(self, when: float) -> None:
        """Move the clock to wall time `when`, stopping at every due timer to let the server
        do what it asks."""
        while True:
            due = self.clock.next_due()
            if due is None or due + (self.clock.time() - self.clock.monotonic()) > when:
                break
            self.clock.advance(max(0.0, due - self.clock.monotonic()))
            self.settle()
        self.clock.advance(max(0.0, when - self.clock.time()))
        self.settle()


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    sent, messages = plan_day(rng, args.signals, args.conversations, args.bursts)
    workdir = Path(tempfile.mkdtemp(prefix="chalie-attention-"))
    stub = StubInterface(name="city-feed", signals=TYPES)
    day = Day(workdir, args.daily_cap)
    try:
        login = httpx.post(f"{day.url}/auth/login", json={"password": "bench"})
        cookie = login.cookies["chalie_session"]
        _, token = pair(day.url, cookie, stub, name="city-feed")
        person = Client(_ServerRef(day.server.port), cookie, "main")
        frames: list[dict[str, Any]] = []
        reader = threading.Thread(target=_read_frames, args=(person, frames), daemon=True)
        reader.start()
        day.run_to(START)
        events = sorted([(s.at, "signal", s) for s in sent] +
                        [(at, "chat", None) for at in messages], key=lambda e: e[0])
        progress(f"{len(sent)} signals ({sum(s.energy >= WAKE for s in sent)} salient), "
                 f"{len(messages)} messages over 14 simulated hours")
        with bearer_client(day.url, token) as program:
            for at, kind, item in events:
                day.run_to(at)
                if kind == "signal":
                    assert isinstance(item, Sent)
                    r = program.post("/api/signals", json={
                        "signal_type": item.kind, "content": f"{item.mark}: {item.kind} news",
                        "source": "city-feed", "activation_energy": item.energy})
                    if r.status_code != 202:
                        raise RuntimeError(f"signal refused: {r.status_code} {r.text}")
                else:
                    person.send({"type": "chat", "text": f"message at {at:.0f}: how is it going"})
                    _wait_for_done(frames)
                day.settle()
            day.run_to(END)
        _wait_for_notifications(day, frames)
        figures = _figures(day, sent, messages, frames)
        person.close()
        return figures
    finally:
        day.stop()
        stub.stop()
        shutil.rmtree(workdir, ignore_errors=True)


class _ServerRef:
    """What the harness's /ws Client needs of a server: its port."""

    def __init__(self, port: int) -> None:
        self.port = port


def _read_frames(client: Client, frames: list[dict[str, Any]]) -> None:
    try:
        while True:
            frames.append(client.recv())
    except Exception:  # the socket closed at the end
        return


def _wait_for_done(frames: list[dict[str, Any]]) -> None:
    """The person's turn is answered: its `done` frame came (counted from the frames so far)."""
    done = sum(f["type"] == "done" for f in frames)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while sum(f["type"] == "done" for f in frames) == done:
        if time.monotonic() > deadline:
            raise RuntimeError("the person's turn was not answered")
        time.sleep(0.001)


def _wait_for_notifications(day: Day, frames: list[dict[str, Any]]) -> None:
    """The person's socket has read every notification the store says was sent."""
    conn = db.connect(day.db_path, busy_timeout_ms=5000, readonly=True)
    try:
        (sent,) = conn.execute("SELECT count(*) FROM proactive WHERE status = 'sent'").fetchone()
    finally:
        conn.close()
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while sum(f["type"] == "notification" for f in frames) < int(sent):
        if time.monotonic() > deadline:
            raise RuntimeError("the person's socket missed notifications")
        time.sleep(0.001)


def _figures(day: Day, sent: list[Sent], messages: list[float],
             frames: list[dict[str, Any]]) -> dict[str, Any]:
    busy_s = day.config.dmn.busy_s
    calls = [c for c in day.model.calls if c.who == "dmn"]
    salient = [s for s in sent if s.energy >= WAKE]
    seen = {m: min(c.at for c in calls if m in c.seen) for m in {x for c in calls for x in c.seen}}
    conn = db.connect(day.db_path, busy_timeout_ms=5000, readonly=True)
    try:
        delivered = conn.execute(
            "SELECT content, delivered_at FROM proactive WHERE status = 'sent' AND path = 'dmn'"
        ).fetchall()
        held_back = conn.execute(
            "SELECT status, reason, count(*) FROM proactive WHERE path = 'dmn' AND status != "
            "'sent' GROUP BY status, reason").fetchall()
    finally:
        conn.close()
    told = {m: min(at for content, at in delivered if m in MARK.findall(content))
            for m in {x for content, _ in delivered for x in MARK.findall(content)}}
    latency = [told[s.mark] - s.at for s in salient if s.mark in told]

    def conversing(at: float) -> bool:
        return any(m <= at < m + busy_s for m in messages)

    faint_calls = 0
    previous: Call | None = None
    for call in calls:
        since = previous.at if previous else -1.0
        new_salient = any(since < s.at <= call.at for s in salient)
        other_new = previous is None or call.store != previous.store
        if not new_salient and not other_new:
            faint_calls += 1
        previous = call
    return {
        "llm_calls": dict(Counter(c.who for c in day.model.calls)),
        "dmn_calls_by_trigger": dict(Counter(c.trigger for c in calls)),
        "dmn_triggers": {f"{t}/{r}": day.metric("chalie_dmn_triggers_total", trigger=t, result=r)
                         for t in ("idle", "cadence", "signal")
                         for r in ("ran", "held", "merged", "busy", "nothing_new", "budget")
                         if day.metric("chalie_dmn_triggers_total", trigger=t, result=r)},
        "signals": {"sent": len(sent), "salient": len(salient),
                    "unattended_metric": day.metric("chalie_signals_unattended_total")},
        "signal_to_notification_s": summary(latency, digits=1),
        "salient_told": len([s for s in salient if s.mark in told]),
        "dmn_held_back": {f"{s}/{r}": n for s, r, n in held_back},
        "salient_never_thought_about": len([s for s in salient if s.mark not in seen]),
        "calls_for_faint_signals": faint_calls,
        "thoughts_during_conversation": len([c for c in calls if conversing(c.at)]),
        "notifications_during_conversation": len([at for _, at in delivered if conversing(at)]),
        "messages": len(messages),
        "ws_notifications": sum(f["type"] == "notification" for f in frames),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--signals", type=int, default=80)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--daily-cap", type=int, default=100,
                        help="dmn.daily_cap (shipped: 4): high, so every thought is sent")
    args = parser.parse_args()
    started = time.monotonic()
    figures = run(args)
    figures["wall_s"] = round(time.monotonic() - started, 1)
    emit("attention", vars(args), **figures)


if __name__ == "__main__":
    sys.exit(main())
