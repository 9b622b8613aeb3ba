"""Signals ingest: signals per second accepted through POST /api/signals/batch, and what the
load does to /ws turns.

It first POSTs an empty batch: a 404 (or 405) means there is nothing to measure and it prints
`"status": "skipped"`. Otherwise: --turns /ws turns alone (the baseline), then --signals signals
in batches of --batch (the contract's maximum is 50) from --concurrency client threads, each
with its own keep-alive connection, each a paired interface sending its bearer token (a stub
interface on loopback answers the pairing's /health and /capabilities; --auth cookie sends the
session cookie instead, as the chat UI would), while one /ws client
keeps running turns. The server's signals.rate_per_min is set high enough not to bind.
Reported: signals accepted per second (the `accepted` counts of the 200 answers over the wall
time), rejected signals, answers by status, batch latency, and the turns' server response
time (the `message` frame's metrics.response_time_s) and client round trip, p50/p99, alone and
under load.

    .venv/bin/python scripts/bench/signals_ingest.py [--signals 100000] [--batch 50]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import _common
import httpx
from _common import emit, log_problems, progress, summary

from tests.integration.harness import Client, ServerProcess, StubLlm
from tests.integration.stub_interface import StubInterface, pair

_common.quiet_logging()

ENDPOINT = "/api/signals/batch"


def signal_body(i: int) -> dict[str, Any]:
    return {
        "signal_type": "weather_update",
        "content": f"Reading {i}: heavy rain expected this evening, 80% chance",
        "source": "bench",
        "topic": "weather",
        "activation_energy": 0.4,
        "metadata": {"precipitation_chance": 0.8, "n": i},
    }


class Totals:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted = 0
        self.rejected = 0
        self.statuses: Counter[int] = Counter()
        self.latency: list[float] = []
        self.samples: list[str] = []


def sender(url: str, auth: dict[str, Any], batches: list[bytes], totals: Totals, *,
           deadline: float, every_s: float) -> None:
    """POST each batch (JSON encoded beforehand: the clients share the server's two cores, and
    what they spend encoding is not the server's cost), one every `every_s` seconds at most."""
    headers = {"Content-Type": "application/json", **auth.pop("headers", {})}
    start = time.monotonic()
    with httpx.Client(base_url=url, timeout=30.0, headers=headers, **auth) as client:
        for n, batch in enumerate(batches):
            if time.monotonic() > deadline:
                return
            due = start + n * every_s
            if every_s and time.monotonic() < due:
                time.sleep(due - time.monotonic())
            t0 = time.perf_counter()
            try:
                r = client.post(ENDPOINT, content=batch)
            except httpx.HTTPError as e:
                with totals.lock:
                    totals.statuses[0] += 1
                    if len(totals.samples) < 5:
                        totals.samples.append(f"{type(e).__name__}: {e}")
                continue
            elapsed = time.perf_counter() - t0
            with totals.lock:
                totals.latency.append(elapsed)
                totals.statuses[r.status_code] += 1
                if r.status_code == 200:
                    body = r.json()
                    totals.accepted += int(body.get("accepted", 0))
                    totals.rejected += int(body.get("rejected", 0))
                elif len(totals.samples) < 5:
                    totals.samples.append(f"{r.status_code}: {r.text[:200]}")


class Turns:
    """Turns run one after another on one /ws client until told to stop."""

    def __init__(self) -> None:
        self.server_s: list[float] = []
        self.client_s: list[float] = []
        self.errors = 0

    def run(self, client: Client, stop: threading.Event | None, count: int) -> None:
        n = 0
        while (stop is None and n < count) or (stop is not None and not stop.is_set()):
            t0 = time.perf_counter()
            frames = client.turn(f"bench turn {n}")
            self.client_s.append(time.perf_counter() - t0)
            message = next((f for f in frames if f["type"] == "message"), None)
            if message is None:
                self.errors += 1
            else:
                self.server_s.append(message["metrics"]["response_time_s"])
            n += 1

    def report(self) -> dict[str, Any]:
        return {"turns": len(self.client_s), "errors": self.errors,
                "server_response_s": summary(self.server_s),
                "client_round_trip_s": summary(self.client_s)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--signals", type=int, default=100000,
                        help="signals to send (100000)")
    parser.add_argument("--turns", type=int, default=200,
                        help="baseline /ws turns before the signals (200)")
    parser.add_argument("--batch", type=int, default=50, help="signals per request (50)")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="client threads, each a paired interface (4)")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="signals per second offered in all (0: as fast as answered)")
    parser.add_argument("--auth", choices=("bearer", "cookie"), default="bearer",
                        help="interfaces' bearer tokens (default) or the login cookie")
    parser.add_argument("--max-seconds", type=float, default=300.0,
                        help="stop sending past this wall time (300)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    params = {"signals": args.signals, "batch": args.batch, "concurrency": args.concurrency,
              "baseline_turns": args.turns, "auth": args.auth, "rate": args.rate,
              "endpoint": ENDPOINT}
    stub = StubLlm()
    workdir = Path(tempfile.mkdtemp(prefix="chalie-bench-signals-"))
    # Neither signals' nor REST's rate limit binds: this measures throughput.
    server = ServerProcess(workdir, stub, log={"level": "info"},
                           signals={"rate_per_min": 1_000_000_000},
                           server={"rest_rate_per_min": 0})
    alone, loaded = Turns(), Turns()
    stubs: list[StubInterface] = []
    try:
        server.start()
        cookie = server.login()
        probe = httpx.post(f"{server.url}{ENDPOINT}", json=[],
                           cookies={"chalie_session": cookie}, timeout=10.0)
        if probe.status_code in (404, 405):
            emit("signals_ingest", params, status="skipped",
                 reason=f"the server answers {probe.status_code} to POST {ENDPOINT}: "
                        "signals are not implemented yet")
            return 0
        chat = server.connect(cookie)
        progress(f"POST {ENDPOINT} [] -> {probe.status_code}; {args.turns} turns alone")
        alone.run(chat, None, args.turns)
        progress(f"sending {args.signals} signals while turns run")
        auths: list[dict[str, Any]] = []
        for k in range(args.concurrency):
            if args.auth == "cookie":
                auths.append({"cookies": {"chalie_session": cookie}})
                continue
            stubs.append(StubInterface(name=f"bench{k}"))
            _, token = pair(server.url, cookie, stubs[-1], name=f"bench{k}", signals=["*"])
            auths.append({"headers": {"Authorization": f"Bearer {token}"}})
        signals = [signal_body(i) for i in range(args.signals)]
        batches = [json.dumps(signals[i:i + args.batch]).encode()
                   for i in range(0, len(signals), args.batch)]
        totals = Totals()
        every = args.concurrency * args.batch / args.rate if args.rate else 0.0
        deadline = time.monotonic() + args.max_seconds
        threads = [
            threading.Thread(target=sender, args=(server.url, auths[k],
                                                  batches[k::args.concurrency], totals),
                             kwargs={"deadline": deadline, "every_s": every})
            for k in range(args.concurrency)
        ]
        stop = threading.Event()
        prober = threading.Thread(target=loaded.run, args=(chat, stop, 0))
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        prober.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        stop.set()
        prober.join()
        assert server.proc is not None
        rss = _common.peak_rss_mib(server.proc.pid)
    finally:
        code = server.stop() if server.proc is not None else None
        stub.close()
        for interface in stubs:
            interface.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    emit(
        "signals_ingest", params,
        status="measured",
        probe_status=probe.status_code,
        accepted=totals.accepted,
        rejected=totals.rejected,
        accepted_per_s=round(totals.accepted / wall, 1) if wall > 0 else None,
        wall_s=round(wall, 3),
        responses_by_status={str(k): v for k, v in sorted(totals.statuses.items())},
        response_samples=totals.samples,
        batch_latency_s=summary(totals.latency),
        turns_alone=alone.report(),
        turns_under_load=loaded.report(),
        server_peak_rss_mib=rss,
        server_log=log_problems(server.log_events()),
        server_exit_code=code,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
