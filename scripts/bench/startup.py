"""Start-up: seconds from process start to the first 200 from GET /health.

Each run starts `python -m chalie serve --config FILE` (what scripts/serve runs, without the
install check) on a known loopback port and polls /health every --poll-ms from the moment
the process is spawned. Two kinds of start, --runs of each:
  cold: a fresh data directory (the database is created and migrated);
  warm: the same data directory again (the database exists and is at the latest version).
The interpreter start and Chalie's imports are part of the figure; a wrong LLM base_url is not
(no LLM is contacted at start-up). Clean-stop time (SIGTERM -> exit) is reported too.

    .venv/bin/python scripts/bench/startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
from _common import ROOT, emit, progress, summary

from tests.conftest import write_config

_common.quiet_logging()


def healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def one_start(data_dir: Path, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    port = _common.free_port()
    config = write_config(workdir, {
        "server": {"port": port},
        "store": {"path": str(data_dir)},
        "auth": {"password": "secret"},
        "llm": {"base_url": "http://127.0.0.1:9/v1"},
        "log": {"format": "json", "level": "info"},
    })
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "chalie", "serve", "--config", str(config)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    result: dict[str, Any] = {"ok": False}
    try:
        deadline = t0 + args.timeout
        while time.perf_counter() < deadline:
            if healthy(port):
                result = {"ok": True, "start_s": time.perf_counter() - t0}
                break
            if proc.poll() is not None:
                result["error"] = f"exited {proc.returncode}: {proc.stderr.read()[-500:]}" \
                    if proc.stderr else f"exited {proc.returncode}"
                return result
            time.sleep(args.poll_ms / 1000)
        else:
            result["error"] = f"not healthy within {args.timeout}s"
        t1 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            result["exit_code"] = proc.wait(30)
            result["stop_s"] = time.perf_counter() - t1
        except subprocess.TimeoutExpired:
            result["exit_code"] = "no exit within 30 s of SIGTERM"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return result


def interpreter_s(code: str, runs: int) -> dict[str, Any]:
    """Wall time of `python -c code` (for the share of start-up that is not Chalie's own)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
        times.append(time.perf_counter() - t0)
    return summary(times, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="starts of each kind (10)")
    parser.add_argument("--poll-ms", type=float, default=5.0, help="/health poll period (5)")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds one start may take before it counts as failed (30)")
    args = parser.parse_args()

    results: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="chalie-bench-startup-") as tmp:
        base = Path(tmp)
        for i in range(args.runs):
            data = base / f"data{i}"
            results["cold"].append(one_start(data, base, args))
            results["warm"].append(one_start(data, base, args))
            cold, warm = results["cold"][-1], results["warm"][-1]
            progress(f"run {i + 1}/{args.runs}: cold {cold.get('start_s', cold.get('error'))}, "
                     f"warm {warm.get('start_s', warm.get('error'))}")

    figures: dict[str, Any] = {}
    for kind, runs in results.items():
        ok = [r for r in runs if r["ok"]]
        figures[kind] = {
            "start_s": summary((r["start_s"] for r in ok), 4),
            "stop_s": summary((r["stop_s"] for r in ok if "stop_s" in r), 4),
            "failures": len(runs) - len(ok),
            "errors": sorted({r["error"] for r in runs if "error" in r})[:3],
            "exit_codes": sorted({r.get("exit_code") for r in ok}, key=str),
        }
    figures["python_bare_s"] = interpreter_s("pass", args.runs)
    figures["python_import_chalie_s"] = interpreter_s(
        "import chalie.cli, chalie.server, chalie.edge.app", args.runs)
    emit("startup", {"runs": args.runs, "poll_ms": args.poll_ms,
                     "command": "python -m chalie serve --config FILE"}, **figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
