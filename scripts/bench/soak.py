"""Soak: tens of thousands of turns against one real server with everything on, watching that
its resources stay flat once warm.

The server runs as a subprocess (tests/integration/harness.ServerProcess) against a stub LLM in
a child process, with:
- memory on: the Encoder encodes every `memory.encode_every_rows` transcript rows; the stub
  answers its structured calls with schema-valid filler;
- a paired stub interface (tests/integration/stub_interface.py) offering the tool `lookup`,
  which the stub LLM calls on every 10th turn, and pushing a signal every 5 turns;
- the background paths: the DMN thinking every --dmn-cadence-s, a scheduled prompt every
  minute (cron "* * * * *"), both notifying channel "main";
- retention windows shrunk to --retention-s (store.transcript_days, tool_calls_days,
  events_days) and store.prune_interval_s 10 s, so pruning reaches a steady state in the run;
- server.session_idle_s --idle-s: a "rare" channel chats every half interval, so its Session
  chats once --idle-s (plus a second) has passed since its last chat, so its Session stops
  and starts again all the time; server.rest_rate_per_min 0 (no REST limit).

The server embeds with the shipped embedder (config/chalie.toml's memory.embedder) unless
--embedder says otherwise.

Turns go round the channels main, c1, c2, c3 one at a time (send `chat`, read to its `done`);
every interval each socket is closed and opened again. Every --report-every turns one JSON line:

    {"interval", "turns", "elapsed_s", "rss_mib", "threads", "fds", "db_bytes" (chalie.db plus
     its -wal), "kept_bytes" (what the store keeps for good: the episodes with their vectors,
     and each turn's record, its figures for the spending report, with the spending rows of
     background jobs), "other_bytes" (db_bytes less kept_bytes), "episodes", "transcript_rows",
     "events_rows",
     "sessions", "sessions_stopped",
     "turn_ms": {"n", "p50", "p99"} (client send -> done over the interval), "log_problems"}

and at the end one summary line ("bench": "soak") comparing the first warm interval with the
last. Warm is the first interval at or past --warm-fraction of the turns (20%) that ends once
retention is in its steady state: the Housekeeper's first run is a minute after start and from
then on it deletes what is older than --retention-s, so warm is also at least
max(60 s, --retention-s) + 20 s into the run. Per measure the summary gives the values, the
change, the tolerance and `flat` (true when last <= warm + tolerance). The tolerances:
rss_mib 10% + 16 MiB; threads +4; fds +8; other_bytes 25% + 4 MiB; turn p50 and p99 50% + 5 ms.
The database grows by what it keeps by design (memory is never pruned, and the stub encodes
every `memory.encode_every_rows` messages; a turn's record stays when its text goes), so it is
the rest of it, `other_bytes`, that must be flat.
`verdict` is "flat" when every measure is; `activity` sums the server's counters (tool
calls, schedule runs, DMN triggers, encodings, signals, Sessions stopped) to show every path
really ran. Growth that keeps going in the interval lines
(rather than one step) is what to look at first when a measure is not flat.

    .venv/bin/python scripts/bench/soak.py                 # 40000 turns (31 minutes on 2 cores)
    .venv/bin/python scripts/bench/soak.py --quick         # 10000 turns, about 8 minutes
    .venv/bin/python scripts/bench/soak.py --embedder hashed   # 40000 turns in 6 minutes
    .venv/bin/python scripts/bench/soak.py --turns 100000 --report-every 5000

Progress goes to stderr; stdout carries only the JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
import httpx
from _common import emit, log_problems, percentile, progress

from chalie.actors.housekeeper import FIRST_RUN_S
from chalie.config_load import load_config
from tests.integration.harness import Client, Reply, ServerProcess, StubLlm, completion, db_rows
from tests.integration.harness import _json_schema_of as json_schema_of
from tests.integration.stub_interface import StubInterface, bearer_client, pair

_common.quiet_logging()

SHIPPED = load_config(None, env={}).memory  # config/chalie.toml's embedder, not the harness's

CHANNELS = ("main", "c1", "c2", "c3")
TOOL_EVERY = 10  # every 10th turn asks for the interface's tool
SIGNAL_EVERY = 5  # a signal from the interface every 5 turns
MARKER = re.compile(r"look up item-(\d+)")
ACTIVITY = ("chalie_interface_tool_calls_total", "chalie_schedule_runs_total",
            "chalie_dmn_triggers_total", "chalie_encodings_total", "chalie_episodes_total",
            "chalie_signals_total", "chalie_sessions_stopped_total", "chalie_turns_total")
TOLERANCES: dict[str, tuple[float, float]] = {  # measure: (relative, absolute)
    "rss_mib": (0.10, 16.0),
    "threads": (0.0, 4.0),
    "fds": (0.0, 8.0),
    "other_bytes": (0.25, 4 * 2**20),
    "turn_p50_ms": (0.50, 5.0),
    "turn_p99_ms": (0.50, 5.0),
}


# --- the stub LLM, in a child process ---------------------------------------------------------

class _Forgetful(list[dict[str, Any]]):
    """A request log that keeps nothing: the soak would otherwise hold every prompt."""

    def append(self, item: dict[str, Any]) -> None:
        pass


class SoakLlm(StubLlm):
    """The stub LLM: filler for structured calls, "stub answer" for turns, and for a turn whose
    message says "look up item-N" (N not seen before) first a call of `lookup`."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = _Forgetful()
        self._called: set[str] = set()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if json_schema_of(body) is None:
            found = MARKER.findall(json.dumps(body.get("messages", ())))
            item = max(found, key=int) if found else None
            if item is not None and item not in self._called:
                self._called.add(item)
                return Reply(completion(tool_calls=[("lookup",
                                                     json.dumps({"query": f"item-{item}"}))]))
        return super()._next_reply(body)


# --- measures ---------------------------------------------------------------------------------

def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def db_bytes(db_path: Path) -> int:
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += (db_path.parent / (db_path.name + suffix)).stat().st_size
        except OSError:
            pass
    return total


def metrics(server: ServerProcess) -> dict[str, float]:
    """GET /metrics, each metric's samples summed over their labels."""
    out: dict[str, float] = {}
    try:
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return out
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        name = sample.split("{", 1)[0]
        if name and not line.startswith("#"):
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                pass
    return out


KEPT_TABLES = ("episodes", "episodes_by_channel", "turns", "sqlite_autoindex_turns_1",
               "turns_by_channel", "turns_by_client_id", "turns_by_path", "spending",
               "spending_by_time")


def kept_bytes(server: ServerProcess) -> int | None:
    """Bytes of what the store keeps for good: the episodes with their vectors (estimated: the
    vector and a row's overhead), the turns' records and the spending rows, with indexes."""
    try:
        (table,), = db_rows(server.db_path, "SELECT sum(pgsize) FROM dbstat WHERE name IN "
                            f"({', '.join('?' * len(KEPT_TABLES))})", *KEPT_TABLES)
        (vectors,), = db_rows(server.db_path, "SELECT sum(length(embedding) + 64) FROM vectors "
                              "WHERE mkey % 4 = 2")
    except Exception:  # a busy store is a gap in the report, not a failure
        return None
    return int(table or 0) + int(vectors or 0)


def count_rows(server: ServerProcess, table: str) -> int | None:
    try:
        return int(db_rows(server.db_path, f"SELECT count(*) FROM {table}")[0][0])
    except Exception:  # a busy or missing table is a gap in the report, not a failure
        return None


def verdicts(warm: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for measure, (relative, absolute) in TOLERANCES.items():
        a, b = warm.get(measure), last.get(measure)
        if a is None or b is None:
            out[measure] = {"warm": a, "last": b, "flat": None}
            continue
        allowed = a * relative + absolute
        out[measure] = {"warm": a, "last": b, "change": round(b - a, 3),
                        "tolerance": round(allowed, 3), "flat": b <= a + allowed}
    return out


# --- the run ----------------------------------------------------------------------------------

class Soak:
    def __init__(self, server: ServerProcess, iface_token: str, args: argparse.Namespace) -> None:
        self.server = server
        self.args = args
        self.cookie = server.login()
        self.clients: dict[str, Client] = {}
        self.signals = bearer_client(server.url, iface_token)
        self.problems: dict[str, int] = {}
        self.started = time.monotonic()
        self.rare_at = self.started

    def connect_all(self) -> None:
        for channel in CHANNELS:
            old = self.clients.pop(channel, None)
            if old is not None:
                old.close()
                self.server.clients.remove(old)
            self.clients[channel] = self.server.connect(self.cookie, channel)

    def turn(self, n: int) -> float:
        """Turn n on its channel; the seconds from send to `done`."""
        text = f"turn {n}: tell me something about number {n}"
        if n % TOOL_EVERY == 0:
            text = f"turn {n}: please look up item-{n}"
        rare = time.monotonic() - self.rare_at > self.args.idle_s + 1.0
        if rare:
            self.rare_at = time.monotonic()
        client = self.server.connect(self.cookie, "rare") if rare else \
            self.clients[CHANNELS[n % len(CHANNELS)]]
        t0 = time.perf_counter()
        client.turn(text)
        took = time.perf_counter() - t0
        if rare:
            client.close()
            self.server.clients.remove(client)
        if n % SIGNAL_EVERY == 0:
            r = self.signals.post("/api/signals", json={
                "signal_type": "soak_tick", "content": f"tick {n}", "activation_energy": 0.5})
            if r.status_code != 202:
                key = f"signal_rejected:{r.status_code}"
                self.problems[key] = self.problems.get(key, 0) + 1
        return took

    def report(self, interval: int, done: int, times: list[float]) -> dict[str, Any]:
        server = self.server
        assert server.proc is not None
        pid = server.proc.pid
        events = server.log_events()
        del server.lines[:]  # what was counted is not kept: the bench must not grow either
        for key, count in log_problems(events)["counts"].items():
            self.problems[key] = self.problems.get(key, 0) + count
        m = metrics(server)
        ms = [t * 1000 for t in times]
        size, kept = db_bytes(server.db_path), kept_bytes(server)
        line = {
            "interval": interval, "turns": done,
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "rss_mib": _common.rss_mib(pid), "threads": _common.thread_count(pid),
            "fds": fd_count(pid), "db_bytes": size, "kept_bytes": kept,
            "other_bytes": None if kept is None else size - kept,
            "episodes": count_rows(server, "episodes"),
            "transcript_rows": count_rows(server, "transcript"),
            "events_rows": count_rows(server, "events"),
            "sessions": m.get("chalie_sessions"),
            "sessions_stopped": m.get("chalie_sessions_stopped_total"),
            "turn_ms": {"n": len(ms), "p50": round(percentile(ms, 50), 2),
                        "p99": round(percentile(ms, 99), 2)},
            "log_problems": log_problems(events)["counts"],
        }
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        return line

    def run(self) -> list[dict[str, Any]]:
        args = self.args
        lines: list[dict[str, Any]] = []
        times: list[float] = []
        self.connect_all()
        for n in range(1, args.turns + 1):
            times.append(self.turn(n))
            if n % args.report_every == 0 or n == args.turns:
                lines.append(self.report(len(lines) + 1, n, times))
                progress(f"{n}/{args.turns} turns")
                times = []
                self.connect_all()
        return lines


def flat_figures(line: dict[str, Any]) -> dict[str, Any]:
    return {**{k: line.get(k) for k in ("rss_mib", "threads", "fds", "other_bytes")},
            "turn_p50_ms": line["turn_ms"]["p50"], "turn_p99_ms": line["turn_ms"]["p99"]}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40000, help="turns in all (40000)")
    parser.add_argument("--report-every", type=int, default=2000,
                        help="turns per interval line (2000)")
    parser.add_argument("--warm-fraction", type=float, default=0.2,
                        help="the first interval at or past this share of the turns is the "
                             "warm baseline (0.2)")
    parser.add_argument("--retention-s", type=float, default=60.0,
                        help="transcript, tool-call and event-log retention in seconds (60)")
    parser.add_argument("--idle-s", type=float, default=5.0,
                        help="server.session_idle_s (5)")
    parser.add_argument("--dmn-cadence-s", type=float, default=20.0,
                        help="dmn.cadence_s: how often the DMN thinks (20)")
    parser.add_argument("--embedder", default=SHIPPED.embedder,
                        help=f"memory.embedder (the shipped one: {SHIPPED.embedder})")
    parser.add_argument("--quick", action="store_true",
                        help="about 90 s: 10000 turns, intervals of 1000, retention 15 s")
    args = parser.parse_args()
    if args.quick:
        args.turns, args.report_every, args.retention_s = 10000, 1000, 15.0
        args.idle_s, args.dmn_cadence_s = 2.0, 5.0
    return args


def server_sections(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    days = args.retention_s / 86400
    unlimited = 10**12
    return {
        "log": {"level": "info"},
        "server": {"session_idle_s": args.idle_s, "rest_rate_per_min": 0},
        "store": {"transcript_days": days, "tool_calls_days": days, "events_days": days,
                  "prune_interval_s": 10.0},
        "memory": {"encode_every_rows": 10, "snapshots_kept": 20, "embedder": args.embedder},
        "dmn": {"enabled": True, "quiet_hours": "", "timezone": "UTC", "boot_delay_s": 1.0,
                "cadence_s": args.dmn_cadence_s, "idle_s": args.dmn_cadence_s,
                "daily_cap": 1_000_000},
        "governor": {f"{p}_tokens_per_day": unlimited
                     for p in ("dmn", "scheduled", "goal", "encoder")},
        "signals": {"rate_per_min": 100_000},
    }


def main() -> int:
    args = parse_args()
    stub = _common.StubInChild(SoakLlm)
    iface = StubInterface(name="soakface")
    workdir = Path(tempfile.mkdtemp(prefix="chalie-bench-soak-"))
    # A StubInChild stands in for the StubLlm (only its base_url is read).
    server = ServerProcess(workdir, stub, **server_sections(args))  # type: ignore[arg-type]
    lines: list[dict[str, Any]] = []
    code = None
    try:
        server.start()
        cookie = server.login()
        _, token = pair(server.url, cookie, iface, name="soakface", signals=["soak_tick"])
        r = httpx.post(f"{server.url}/api/schedules", cookies={"chalie_session": cookie},
                       json={"prompt": "Anything new on the soak?", "cron": "* * * * *",
                             "timezone": "UTC"}, timeout=30)
        if r.status_code != 201:
            progress(f"the schedule was not made: {r.status_code} {r.text[:200]}")
        soak = Soak(server, token, args)
        lines = soak.run()
        problems = soak.problems
        counters = metrics(server)
        activity = {k.removeprefix("chalie_"): counters.get(k) for k in ACTIVITY}
        soak.signals.close()
    finally:
        if server.proc is not None:
            code = server.stop()
        stub.close()
        iface.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    warm_at = args.turns * args.warm_fraction
    settled_s = max(FIRST_RUN_S, args.retention_s) + 20.0
    warm = next((x for x in lines if x["turns"] >= warm_at and x["elapsed_s"] >= settled_s),
                lines[-1])
    last = lines[-1]
    growth = verdicts(flat_figures(warm), flat_figures(last))
    flat = all(g["flat"] for g in growth.values() if g["flat"] is not None)
    emit(
        "soak",
        {"turns": args.turns, "report_every": args.report_every, "channels": list(CHANNELS),
         "retention_s": args.retention_s, "session_idle_s": args.idle_s,
         "dmn_cadence_s": args.dmn_cadence_s, "schedule": "* * * * *",
         "tool_every": TOOL_EVERY, "signal_every": SIGNAL_EVERY,
         "llm": "stub in a child process", "warm_fraction": args.warm_fraction,
         "settled_s": settled_s},
        warm_interval=warm["interval"],
        last_interval=last["interval"],
        elapsed_s=last["elapsed_s"],
        growth=growth,
        verdict="flat" if flat else "growing",
        activity=activity,
        server_log=problems,
        server_exit_code=code,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
