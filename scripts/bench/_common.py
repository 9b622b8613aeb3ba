"""Shared helpers of the benchmarks: percentiles, the one JSON line, the machine, peak RSS.

Importing this module re-runs the benchmark under the project's .venv when it was started with
another Python (installing .venv first if needed), puts the repository root on sys.path (so
`chalie` and `tests.integration.harness` import from the checkout) and sends every log record
of the benchmark process itself to stderr: stdout carries exactly one JSON line per benchmark.
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _run_in_project_venv() -> None:
    """Re-run this benchmark under the project's .venv, installing it first if needed (as
    scripts/test does), so `python3 scripts/bench/NAME.py` works on a fresh clone."""
    venv = ROOT / ".venv"
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/_venv.sh" dev'], check=True)
    python = venv / "bin" / "python"
    os.execv(python, [str(python), *sys.argv])


_run_in_project_venv()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def quiet_logging() -> None:
    """Importing the test harness configures logging to stdout at DEBUG (tests.conftest does);
    route the benchmark process's own records to stderr, warnings and up only."""
    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)


def percentile(values: Iterable[float], p: float) -> float:
    """The p-th percentile (0-100) with linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = (len(ordered) - 1) * p / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Iterable[float], digits: int = 6) -> dict[str, Any]:
    """n, p50, p90, p99, max and mean of `values`, rounded; empty gives n = 0 only."""
    data = list(values)
    if not data:
        return {"n": 0}
    return {
        "n": len(data),
        "p50": round(percentile(data, 50), digits),
        "p90": round(percentile(data, 90), digits),
        "p99": round(percentile(data, 99), digits),
        "max": round(max(data), digits),
        "mean": round(sum(data) / len(data), digits),
    }


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def revision() -> str | None:
    """The checkout's commit, with "+dirty" when chalie/ has uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "chalie"],
                               capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty.strip() else "")


def emit(bench: str, params: dict[str, Any], **figures: Any) -> None:
    """Print the benchmark's one JSON line on stdout."""
    line = {"bench": bench, "params": params, **figures, "machine": machine(),
            "revision": revision()}
    sys.stdout.write(json.dumps(line, sort_keys=False) + "\n")
    sys.stdout.flush()


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def peak_rss_mib(pid: int) -> float | None:
    """VmHWM (peak resident set) of a live process, in MiB; None when unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def rss_mib(pid: int) -> float | None:
    """VmRSS (current resident set) of a live process, in MiB; None when unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def thread_count(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def free_port() -> int:
    """A loopback port that was free a moment ago (for a server whose port we must know
    before it logs it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def turn_events(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per stored turn: its `turn_finished` log event (llm_s, tokens, ...) with response_time_s
    taken from `turn_stored`, which is the figure the message frame carries: receipt of the
    chat to the moment the turn is stored, just before its frames are pushed."""
    finished: dict[str, dict[str, Any]] = {}
    stored: dict[str, float] = {}
    for e in events:
        if "turn_id" not in e:
            continue
        if e.get("event") == "turn_finished":
            finished[e["turn_id"]] = e
        elif e.get("event") == "turn_stored" and "response_time_s" in e:
            stored[e["turn_id"]] = e["response_time_s"]
    return {t: {**e, "response_time_s": stored[t]} for t, e in finished.items() if t in stored}


def log_problems(events: Iterable[dict[str, Any]], limit: int = 5) -> dict[str, Any]:
    """Count the server's warning/error/critical log lines by event, with a few samples."""
    counts: dict[str, int] = {}
    samples: list[dict[str, Any]] = []
    for e in events:
        if e.get("level") in ("warning", "error", "critical"):
            key = f"{e.get('level')}:{e.get('event')}"
            counts[key] = counts.get(key, 0) + 1
            if len(samples) < limit:
                samples.append({k: e[k] for k in ("level", "event", "error", "exception",
                                                  "logger") if k in e})
    return {"counts": counts, "samples": samples}


def stamp(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def store_waits(events: Iterable[dict[str, Any]],
                only: Iterable[str] | None = None) -> list[float]:
    """Per turn (of `only`, when given), seconds from the Session's `turn_finished` to the
    StoreWriter's `turn_stored` (the queue in front of the single writer plus the commit),
    from the log timestamps."""
    finished: dict[str, float] = {}
    stored: dict[str, float] = {}
    for e in events:
        if "turn_id" in e and "timestamp" in e:
            if e.get("event") == "turn_finished":
                finished[e["turn_id"]] = stamp(e)
            elif e.get("event") == "turn_stored":
                stored[e["turn_id"]] = stamp(e)
    wanted = set(only) if only is not None else set(finished)
    return [stored[t] - f for t, f in finished.items() if t in stored and t in wanted]


def turn_spans(events: list[dict[str, Any]], by_id: dict[str, dict[str, Any]],
               ids: list[str]) -> dict[str, tuple[float, float]]:
    """Per measured turn: (receipt, stored) as wall-clock times from the log: the stored
    time of its turn_stored line, less its response_time_s."""
    stored = {e["turn_id"]: stamp(e) for e in events
              if e.get("event") == "turn_stored" and "turn_id" in e and "timestamp" in e}
    return {t: (stored[t] - by_id[t]["response_time_s"], stored[t])
            for t in ids if t in stored and t in by_id}


def context_seconds(events: list[dict[str, Any]], ids: list[str]) -> list[float]:
    """Per measured turn, seconds from turn_started to context_ready (identity, history and
    recall gathered on the worker pool), from the log timestamps."""
    wanted = set(ids)
    started: dict[str, float] = {}
    ready: dict[str, float] = {}
    for e in events:
        if e.get("turn_id") in wanted and "timestamp" in e:
            if e.get("event") == "turn_started":
                started[e["turn_id"]] = stamp(e)
            elif e.get("event") == "context_ready":
                ready.setdefault(e["turn_id"], stamp(e))
    return [ready[t] - s for t, s in started.items() if t in ready]


def turn_phases(events: list[dict[str, Any]], ids: list[str]) -> dict[str, float]:
    """Where a measured turn's time went, p50 in ms, from its log lines: `context`
    (context_ready's ms: identity, history, recall, topic), `recall` and `embedding_wait`
    (its recall_ms and embed_wait_ms: of the context, recall, and of it, waiting for the
    query's embedding), `llm` (turn_finished's llm_s), `around_llm` (context_ready to
    turn_finished less the LLM: the request built, the answer handled) and `storing`
    (turn_finished to turn_stored: the turn's transaction)."""
    wanted = set(ids)
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for e in events:
        if e.get("turn_id") in wanted and "timestamp" in e:
            by.setdefault(e["turn_id"], {}).setdefault(e.get("event", ""), e)
    parts: dict[str, list[float]] = {k: [] for k in (
        "context", "recall", "embedding_wait", "llm", "around_llm", "storing")}
    for found in by.values():
        need = ("turn_started", "context_ready", "turn_finished", "turn_stored")
        if not all(n in found for n in need):
            continue
        _, ready, finished, stored = (found[n] for n in need)
        llm = finished.get("llm_s", 0.0)
        parts["context"].append(ready.get("ms", 0.0) / 1000)
        parts["recall"].append(ready.get("recall_ms", 0.0) / 1000)
        parts["embedding_wait"].append(ready.get("embed_wait_ms", 0.0) / 1000)
        parts["llm"].append(llm)
        parts["around_llm"].append(stamp(finished) - stamp(ready) - llm)
        parts["storing"].append(stamp(stored) - stamp(finished))
    return {k: round(statistics.median(v) * 1000, 2) for k, v in parts.items() if v}


def encodings(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) of every encoding: encoding_started to its episodes_stored (or to the
    channel's next encoding_failed / encoding_skipped / episodes_not_stored)."""
    spans = []
    for n, e in enumerate(events):
        if e.get("event") != "encoding_started" or "timestamp" not in e:
            continue
        end = None
        for later in events[n + 1:]:
            name = later.get("event")
            if (name == "episodes_stored" and later.get("encoding_id") == e.get("encoding_id")) \
                    or (name in ("encoding_failed", "encoding_skipped", "episodes_not_stored")
                        and later.get("channel") == e.get("channel")):
                end = stamp(later)
                break
        spans.append((stamp(e), end if end is not None else float("inf")))
    return spans


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a live process has used so far."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return round((int(fields[11]) + int(fields[12])) / ticks, 2)  # utime, stime


def own_cpu_seconds() -> float:
    """User + system CPU seconds of this process (the benchmark client) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 2)


def _stub_main(conn: Connection, make: Callable[[], Any] | None) -> None:
    """Child process: run the stub LLM until the parent says stop (or goes away)."""
    from tests.integration.harness import StubLlm  # noqa: PLC0415  (the child's only)

    quiet_logging()
    stub = (make or StubLlm)()
    conn.send(stub.port)
    try:
        conn.recv()
    except EOFError:
        pass
    stub.close()


class StubInChild:
    """A stub LLM (tests.integration.harness.StubLlm, or what `make` builds: a module-level
    class or function) in its own process, so that its threads do not share the client's GIL;
    `base_url` is all ServerProcess needs from it."""

    def __init__(self, make: Callable[[], Any] | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_stub_main, args=(child, make), daemon=True)
        self._proc.start()
        if not self._conn.poll(30):
            self._proc.kill()
            raise RuntimeError("the stub LLM child process did not start")
        self.port = self._conn.recv()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)


def scrape(url: str) -> dict[str, float]:
    """The server's /metrics (no login needed), as {sample name{labels}: value}."""
    import httpx  # noqa: PLC0415  (imported here: this module runs first under any Python)
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    try:
        text = httpx.get(f"{url}/metrics", timeout=10).text
    except httpx.HTTPError as e:
        progress(f"/metrics unreadable: {e}")
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out
