"""Concurrency: many authenticated /ws sessions on one server, each chatting, against a stub LLM
that answers instantly.

One login (the password check is scrypt, ~50 ms), its cookie reused by every socket. Socket i
uses channel `c<i>`, so every socket is its own Session. All sockets connect first (at most
--connect-concurrency handshakes in flight), then every session starts chatting at once and
runs --turns-per-session turns back to back (a turn: send `chat`, read up to its `done`).

The client is one asyncio event loop (tornado.websocket), not a thread per socket; the stub LLM
runs in a child process so that its threads do not share the client's GIL. Reported: connect
and turn errors, client turn time (send -> `done`), the server's response_time_s and time
outside the LLM from its `turn_finished` and `turn_stored` log lines, throughput, and the
server's peak RSS (VmHWM) and thread count. The server runs with server.session_idle_s set to
--idle-s (2 s): after the run the bench waits for every Session to stop (the chalie_sessions
gauge at 0) and reports the threads left (`server_threads_after_idle`, from /proc) beside the
peak: one thread per idle session should be gone.

    .venv/bin/python scripts/bench/concurrency.py [--sessions 1000] [--turns-per-session 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import _common
import httpx
from _common import emit, log_problems, progress, summary, turn_events
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from tests.integration.harness import ServerProcess, wait_for

IDLE_GRACE_S = 30.0  # beyond --idle-s, how long the bench waits for the Sessions to stop

_common.quiet_logging()


class Tally:
    """Everything the client saw."""

    def __init__(self) -> None:
        self.connect_s: list[float] = []
        self.turn_s: list[float] = []
        self.turn_ids: list[str] = []
        self.errors: Counter[str] = Counter()
        self.error_samples: list[str] = []
        self.connected = 0
        self.sessions_completed = 0
        self.pongs = 0

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] += 1
        if len(self.error_samples) < 8:
            self.error_samples.append(f"{kind}: {detail[:200]}")


async def read_turn(ws: WebSocketClientConnection, tally: Tally,
                    timeout: float) -> dict[str, Any] | None:
    """Frames up to the turn's `done`; answers pings. Returns the `done` frame or None."""
    while True:
        raw = await asyncio.wait_for(ws.read_message(), timeout)
        if raw is None:
            tally.error("socket_closed", f"code {ws.close_code} {ws.close_reason}")
            return None
        frame = json.loads(raw)
        kind = frame.get("type")
        if kind == "ping":
            await ws.write_message(json.dumps({"type": "pong"}))
            tally.pongs += 1
        elif kind == "error":
            tally.error("error_frame", str(frame.get("message")))
        elif kind == "done":
            return dict(frame)


class Bench:
    """The client side: every session's coroutine, sharing one tally."""

    def __init__(self, server: ServerProcess, cookie: str, args: argparse.Namespace) -> None:
        self.server = server
        self.cookie = cookie
        self.args = args
        self.tally = Tally()
        self.phases: dict[str, float] = {}
        self.peaks: dict[str, float] = {}
        self.ready = 0

    async def session(self, i: int, gate: asyncio.Semaphore, go: asyncio.Event) -> None:
        args, tally = self.args, self.tally
        request = HTTPRequest(
            f"ws://127.0.0.1:{self.server.port}/ws?channel=c{i}",
            headers={"Cookie": f"chalie_session={self.cookie}"},
            connect_timeout=args.turn_timeout, request_timeout=args.turn_timeout,
        )
        try:
            async with gate:
                t0 = time.perf_counter()
                ws = await websocket_connect(request)
                tally.connect_s.append(time.perf_counter() - t0)
        except Exception as e:  # a failure to connect is a result, not a crash of the bench
            tally.error("connect", f"{type(e).__name__}: {e}")
            self.ready += 1
            return
        tally.connected += 1
        self.ready += 1
        await go.wait()
        try:
            for t in range(args.turns_per_session):
                t0 = time.perf_counter()
                await ws.write_message(json.dumps({"type": "chat",
                                                   "text": f"session {i} turn {t}"}))
                done = await read_turn(ws, tally, args.turn_timeout)
                if done is None:
                    return
                tally.turn_s.append(time.perf_counter() - t0)
                tally.turn_ids.append(str(done.get("exchange_id")))
                if args.think_s:
                    await asyncio.sleep(args.think_s)
            tally.sessions_completed += 1
        except TimeoutError:
            tally.error("turn_timeout", f"session {i}: no `done` within {args.turn_timeout}s")
        except Exception as e:
            tally.error("turn", f"{type(e).__name__}: {e}")
        finally:
            ws.close()

    async def sample_server(self, stop: asyncio.Event) -> None:
        """Keep the highest thread count and RSS seen while the bench runs."""
        assert self.server.proc is not None
        pid = self.server.proc.pid
        while not stop.is_set():
            threads = _common.thread_count(pid)
            rss = _common.rss_mib(pid)
            if threads is not None:
                self.peaks["threads"] = max(self.peaks.get("threads", 0), threads)
            if rss is not None:
                self.peaks["rss_mib"] = max(self.peaks.get("rss_mib", 0.0), rss)
            try:
                await asyncio.wait_for(stop.wait(), 0.25)
            except TimeoutError:
                pass

    async def drive(self) -> None:
        args = self.args
        gate = asyncio.Semaphore(args.connect_concurrency)
        go = asyncio.Event()
        stop_sampling = asyncio.Event()
        sampler = asyncio.create_task(self.sample_server(stop_sampling))
        t0 = time.monotonic()
        tasks = [asyncio.create_task(self.session(i, gate, go)) for i in range(args.sessions)]
        while self.ready < args.sessions:
            await asyncio.sleep(0.05)
        self.phases["connect_all_s"] = round(time.monotonic() - t0, 3)
        progress(f"{self.tally.connected}/{args.sessions} sockets open in "
                 f"{self.phases['connect_all_s']}s; chatting")
        assert self.server.proc is not None
        pid = self.server.proc.pid
        cpu0, own0 = _common.cpu_seconds(pid), _common.own_cpu_seconds()
        t1 = time.monotonic()
        go.set()
        _, pending = await asyncio.wait(tasks, timeout=args.max_seconds)
        for task in pending:
            task.cancel()
        if pending:
            self.tally.error("bench_deadline",
                             f"{len(pending)} sessions still running at --max-seconds")
            await asyncio.gather(*pending, return_exceptions=True)
        self.phases["chat_s"] = round(time.monotonic() - t1, 3)
        cpu1 = _common.cpu_seconds(pid)
        if cpu0 is not None and cpu1 is not None:
            self.phases["server_cpu_s"] = round(cpu1 - cpu0, 2)
        self.phases["client_cpu_s"] = round(_common.own_cpu_seconds() - own0, 2)
        stop_sampling.set()
        await sampler


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000, help="sockets/channels (1000)")
    parser.add_argument("--turns-per-session", type=int, default=3, help="turns each (3)")
    parser.add_argument("--think-s", type=float, default=0.0,
                        help="pause between a session's turns in seconds (0)")
    parser.add_argument("--connect-concurrency", type=int, default=50,
                        help="WebSocket handshakes in flight at once (50)")
    parser.add_argument("--turn-timeout", type=float, default=120.0,
                        help="seconds a turn (or a connect) may take before it counts as failed")
    parser.add_argument("--max-seconds", type=float, default=900.0,
                        help="bound on the chatting phase; sessions left are cancelled (900)")
    parser.add_argument("--workers", type=int, default=None,
                        help="act.workers of the server (default: the config default)")
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL", "OFF"), default=None,
                        help="store.synchronous of the server (default: the config default)")
    parser.add_argument("--idle-s", type=float, default=2.0,
                        help="server.session_idle_s: idle Sessions stop after it (2)")
    return parser.parse_args()


def sessions_running(server: ServerProcess) -> float | None:
    """The chalie_sessions gauge from GET /metrics; None when it cannot be read."""
    try:
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "chalie_sessions":
            return float(value)
    return None


def after_idle(server: ServerProcess, idle_s: float) -> dict[str, Any]:
    """Wait until every Session has stopped (at most idle_s + IDLE_GRACE_S), then the
    server's threads and RSS."""
    assert server.proc is not None
    pid = server.proc.pid
    t0 = time.monotonic()
    try:
        wait_for(lambda: sessions_running(server) == 0, idle_s + IDLE_GRACE_S)
    except AssertionError:
        progress("some Sessions did not stop within the idle timeout and grace")
    return {"waited_s": round(time.monotonic() - t0, 2),
            "sessions": sessions_running(server),
            "threads": _common.thread_count(pid), "rss_mib": _common.rss_mib(pid)}


def main() -> int:
    args = parse_args()
    stub = _common.StubInChild()
    workdir = Path(tempfile.mkdtemp(prefix="chalie-bench-concurrency-"))
    sections: dict[str, dict[str, Any]] = {"log": {"level": "info"},
                                           "server": {"session_idle_s": args.idle_s}}
    if args.workers is not None:
        sections["act"] = {"workers": args.workers}
    if args.synchronous is not None:
        sections["store"] = {"synchronous": args.synchronous}
    # A StubInChild stands in for the StubLlm (only its base_url is read).
    server = ServerProcess(workdir, stub, **sections)  # type: ignore[arg-type]
    bench: Bench | None = None
    events: list[dict[str, Any]] = []
    peak_rss = None
    code = None
    idle: dict[str, Any] = {}
    try:
        server.start()
        bench = Bench(server, server.login(), args)
        asyncio.run(bench.drive())
        want = len(bench.tally.turn_ids)
        try:
            wait_for(lambda: len(turn_events(server.log_events())) >= want, 10)
        except AssertionError:
            progress("some turn log lines never arrived; reporting those found")
        assert server.proc is not None
        peak_rss = _common.peak_rss_mib(server.proc.pid)
        progress(f"waiting for the Sessions to stop (session_idle_s {args.idle_s:g})")
        idle = after_idle(server, args.idle_s)
        events = server.log_events()
    finally:
        if server.proc is not None:
            code = server.stop()
        stub.close()
        shutil.rmtree(workdir, ignore_errors=True)

    if bench is None:
        return 1
    tally, phases, peaks = bench.tally, bench.phases, bench.peaks
    by_id = turn_events(events)
    found = [by_id[t] for t in tally.turn_ids if t in by_id]
    expected = args.sessions * args.turns_per_session
    chat_s = phases.get("chat_s", 0.0)
    emit(
        "concurrency",
        {"sessions": args.sessions, "turns_per_session": args.turns_per_session,
         "think_s": args.think_s, "connect_concurrency": args.connect_concurrency,
         "act_workers": args.workers or "default (16)",
         "store_synchronous": args.synchronous or "default (FULL)",
         "session_idle_s": args.idle_s,
         "client": "one asyncio loop, tornado.websocket", "llm": "stub in a child process"},
        sockets_open=tally.connected,
        turns_expected=expected,
        turns_completed=len(tally.turn_s),
        sessions_completed=tally.sessions_completed,
        errors=sum(tally.errors.values()),
        errors_by_kind=dict(tally.errors),
        error_samples=tally.error_samples,
        connect_s=summary(tally.connect_s, 4),
        connect_all_s=phases.get("connect_all_s"),
        chat_phase_s=chat_s,
        turns_per_s=round(len(tally.turn_s) / chat_s, 1) if chat_s else None,
        server_cpu_s_chat_phase=phases.get("server_cpu_s"),
        server_cpu_s_per_turn=round(phases["server_cpu_s"] / len(tally.turn_s), 5)
        if tally.turn_s and "server_cpu_s" in phases else None,
        client_cpu_s_chat_phase=phases.get("client_cpu_s"),
        client_turn_s=summary(tally.turn_s, 4),
        server_response_time_s=summary((e["response_time_s"] for e in found), 4),
        server_llm_s=summary((e["llm_s"] for e in found), 4),
        server_outside_llm_s=summary((e["response_time_s"] - e["llm_s"] for e in found), 4),
        server_store_wait_s=summary(_common.store_waits(events, tally.turn_ids), 4),
        server_peak_rss_mib=peak_rss,
        server_peak_threads=peaks.get("threads"),
        server_threads_after_idle=idle.get("threads"),
        server_rss_mib_after_idle=idle.get("rss_mib"),
        sessions_after_idle=idle.get("sessions"),
        idle_wait_s=idle.get("waited_s"),
        pongs_sent=tally.pongs,
        server_log=log_problems(events),
        server_exit_code=code,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
