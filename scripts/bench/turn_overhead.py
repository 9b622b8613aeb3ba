"""Turn overhead: N sequential chat turns over /ws against a stub LLM that answers instantly.

What the server adds around the LLM call is what is left when the LLM costs (almost) nothing:
for every turn, response_time_s (from the `turn_stored` log line, the same figure as the
message frame's metrics.response_time_s: receipt of the frame to the stored answer) minus llm_s
(time inside LLM HTTP requests, as measured around the request, from `turn_finished`). The
client's own round trip (send -> `done` frame) is reported too: it adds the push and the socket.

    .venv/bin/python scripts/bench/turn_overhead.py [--turns 500] [--warmup 20]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
from _common import emit, log_problems, progress, summary, turn_events

from tests.integration.harness import ServerProcess, StubLlm, wait_for

_common.quiet_logging()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=500, help="measured turns (default 500)")
    parser.add_argument("--warmup", type=int, default=20,
                        help="turns before measuring, not reported (default 20)")
    parser.add_argument("--max-seconds", type=float, default=600.0,
                        help="stop early (and say so) past this wall time (default 600)")
    return parser.parse_args()


class Run:
    """What one run of sequential turns saw."""

    def __init__(self) -> None:
        self.client_rtt: list[float] = []
        self.measured_ids: list[str] = []
        self.frame_errors = 0
        self.stopped_early = False
        self.wall = 0.0
        self.events: list[dict[str, Any]] = []
        self.rss: float | None = None
        self.server_cpu_s: float | None = None
        self.exit_code: int | None = None


def run(args: argparse.Namespace) -> Run:
    stub = StubLlm()
    workdir = Path(tempfile.mkdtemp(prefix="chalie-bench-overhead-"))
    server = ServerProcess(workdir, stub, log={"level": "info"})
    deadline = time.monotonic() + args.max_seconds
    out = Run()
    try:
        server.start()
        client = server.connect()
        total = args.warmup + args.turns
        assert server.proc is not None
        cpu0 = _common.cpu_seconds(server.proc.pid)
        started = time.monotonic()
        done = 0
        for i in range(total):
            if time.monotonic() > deadline:
                out.stopped_early = True
                break
            t0 = time.perf_counter()
            frames = client.turn(f"benchmark turn {i}: what is the weather like?")
            rtt = time.perf_counter() - t0
            done += 1
            if any(f["type"] == "error" for f in frames):
                out.frame_errors += 1
            if i >= args.warmup:
                out.client_rtt.append(rtt)
                out.measured_ids.append(frames[-1]["exchange_id"])
            if done % 100 == 0:
                progress(f"{done}/{total} turns")
        out.wall = time.monotonic() - started
        cpu1 = _common.cpu_seconds(server.proc.pid)
        if cpu0 is not None and cpu1 is not None and done:
            out.server_cpu_s = (cpu1 - cpu0) / done
        # turn_stored is logged before the turn's frames are pushed, so every turn's line is
        # already written; give the log pump a moment to read it.
        try:
            wait_for(lambda: len(turn_events(server.log_events())) >= done, timeout=10)
        except AssertionError:
            progress("some turn log lines never arrived; reporting those found")
        out.events = server.log_events()
        out.rss = _common.peak_rss_mib(server.proc.pid) if server.proc else None
    finally:
        out.exit_code = server.stop() if server.proc is not None else None
        stub.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return out


def main() -> int:
    args = parse_args()
    r = run(args)
    by_id = turn_events(r.events)
    found = [by_id[t] for t in r.measured_ids if t in by_id]
    response = [e["response_time_s"] for e in found]
    outside = [e["response_time_s"] - e["llm_s"] for e in found]
    share = [o / t for o, t in zip(outside, response, strict=True) if t > 0]
    after_finish = [c - by_id[t]["response_time_s"]
                    for c, t in zip(r.client_rtt, r.measured_ids, strict=True) if t in by_id]
    emit(
        "turn_overhead",
        {"turns": args.turns, "warmup": args.warmup, "llm": "stub on loopback, instant",
         "config": "defaults (history_turns 20, act.workers 16, store.synchronous FULL)"},
        turns_measured=len(found),
        stopped_early=r.stopped_early,
        response_time_s=summary(response),
        llm_s=summary(e["llm_s"] for e in found),
        outside_llm_s=summary(outside),
        outside_llm_share=summary(share, digits=3),
        client_round_trip_s=summary(r.client_rtt),
        client_after_server_s=summary(after_finish),
        server_store_wait_s=summary(_common.store_waits(r.events, r.measured_ids)),
        turns_per_s=round(len(r.client_rtt) / r.wall, 1) if r.wall > 0 else None,
        server_cpu_s_per_turn=round(r.server_cpu_s, 5) if r.server_cpu_s is not None else None,
        error_frames=r.frame_errors,
        server_log=log_problems(r.events),
        server_peak_rss_mib=r.rss,
        server_exit_code=r.exit_code,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
