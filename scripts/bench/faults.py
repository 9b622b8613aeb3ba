"""Faults, from outside: what the person sees, how many turns are lost, how long recovery takes.

Each fault runs against a real server process (a stub LLM on loopback) with the shipped
defaults, except where a fault needs a setting to be short:
- disk_full: the data directory on a 16 MiB tmpfs, filled to the last byte while chatting;
  one turn runs into it, two more messages are sent meanwhile; then the filler is deleted.
- read_only: the database and its WAL made immutable (chattr +i: the kernel refuses every
  write, root's too, as after a read-only remount); one turn runs into it; then writable again.
- damaged_at_start: pages in the middle of a stopped server's database overwritten; `chalie
  serve` started on it.
- llm_stall: the stub stops sending mid-stream; `llm.stall_timeout_s` = 2, no fallback.
Reported per fault: the frames the person saw, the seconds from sending to the first frame
that said what was wrong, turns lost (messages sent that never reached the store), and the
seconds from removing the cause to the kept messages' answers and to /health answering 200.
The first two need root (mount, chattr): they are skipped otherwise, and say so.

    .venv/bin/python scripts/bench/faults.py [--probe-s 2.0] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _common
import apsw
import httpx
from _common import emit, progress

from tests.faults.conftest import fill, kept
from tests.integration.harness import (
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)

_common.quiet_logging()


def healthy(server: ServerProcess) -> bool:
    return httpx.get(f"{server.url}/health", timeout=10).status_code == 200


def stored_turns(server: ServerProcess) -> list[str]:
    return [t for (t,) in db_rows(server.db_path, "SELECT user_text FROM turns")]


def kept_then_answered(workdir: Path, llm: StubLlm, probe_s: float, *, fault: str
                       ) -> dict[str, Any]:
    """A store that cannot take writes (disk_full or read_only), then can again."""
    data = workdir / "data"
    data.mkdir()
    if fault == "disk_full":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(data)], check=True)
    server = ServerProcess(workdir, llm, store={"fault_probe_s": probe_s}).start()
    undo: list[Path] = []
    try:
        client = server.connect()
        client.turn("before the fault")
        if fault == "disk_full":
            undo.append(fill(data))
        else:
            undo += [server.db_path, server.db_path.with_name("chalie.db-wal")]
            subprocess.run(["chattr", "+i", *map(str, undo)], check=True)
        sent = time.monotonic()
        frames = kept(client, "runs into the fault", "f-1")
        told_s = time.monotonic() - sent
        saw = [f["type"] for f in frames]
        said = next(f for f in frames if f["type"] == "error")["message"]
        for n in (2, 3):
            kept(client, f"sent meanwhile {n}", f"f-{n}")
        removed = time.monotonic()
        if fault == "disk_full":
            undo[0].unlink()
        else:
            subprocess.run(["chattr", "-i", *map(str, undo)], check=True)
        answered = 0
        while answered < 3:
            if client.recv()["type"] == "message":
                answered += 1
        answers_s = time.monotonic() - removed
        wait_for(lambda: healthy(server))
        health_s = time.monotonic() - removed
        texts = stored_turns(server)
        lost = sum(t not in texts for t in ("runs into the fault", "sent meanwhile 2",
                                            "sent meanwhile 3"))
        doubled = len(texts) - len(set(texts))
        return {"saw": saw, "said": said, "told_s": round(told_s, 3), "turns_lost": lost,
                "doubled": doubled, "answered_after_s": round(answers_s, 3),
                "healthy_after_s": round(health_s, 3)}
    except Exception:
        progress("the server's last log lines:\n" + "".join(server.lines[-40:]))
        raise
    finally:
        server.kill()
        if fault == "disk_full":
            subprocess.run(["umount", "-l", str(data)], check=False)
        elif undo:
            subprocess.run(["chattr", "-i", *map(str, undo)], check=False)


def damaged_at_start(workdir: Path, llm: StubLlm) -> dict[str, Any]:
    server = ServerProcess(workdir, llm).start()
    client = server.connect()
    for n in range(40):
        client.turn(f"line {n} about the garden " * 8)
    server.stop()
    conn = apsw.Connection(str(server.db_path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    pages = server.db_path.stat().st_size // 4096
    with server.db_path.open("r+b") as f:
        f.seek(pages // 2 * 4096)
        f.write(b"\xa5" * 4096 * 3)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "chalie", "serve", "--config",
                           str(server.config_path)], cwd=_common.ROOT, capture_output=True,
                          text=True, timeout=60, check=False,
                          env={k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")})
    return {"exit_code": done.returncode, "seconds": round(time.monotonic() - started, 3),
            "lines": done.stderr.strip().splitlines(), "db_mib": round(pages * 4096 / 2**20, 2)}


def llm_stall(workdir: Path, llm: StubLlm) -> dict[str, Any]:
    release = threading.Event()
    server = ServerProcess(workdir, llm, llm={"base_url": llm.base_url, "retries": 0,
                                              "stall_timeout_s": 2.0}).start()
    try:
        client = server.connect()
        llm.queue(Reply(completion("The answer begins here and goes on."), pause=release,
                        pause_after=2))
        sent = time.monotonic()
        frames = client.turn("stall please")
        return {"saw": [f["type"] for f in frames], "said": frames[-2].get("message"),
                "seconds": round(time.monotonic() - sent, 3),
                "next_turn": client.turn("and now?")[-2]["type"]}
    finally:
        release.set()
        server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--probe-s", type=float, default=2.0,
                        help="store.fault_probe_s (default 2.0, the shipped default)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each fault (default 3)")
    args = parser.parse_args()
    root = os.geteuid() == 0 and shutil.which("chattr") is not None
    figures: dict[str, Any] = {}
    for fault in ("disk_full", "read_only", "damaged_at_start", "llm_stall"):
        if fault in ("disk_full", "read_only") and not root:
            figures[fault] = {"skipped": "needs root (mount, chattr)"}
            continue
        runs = []
        for run in range(args.runs):
            progress(f"{fault}: run {run + 1}/{args.runs}")
            llm = StubLlm()
            with tempfile.TemporaryDirectory(prefix=f"chalie-fault-{fault}-") as tmp:
                try:
                    if fault == "damaged_at_start":
                        runs.append(damaged_at_start(Path(tmp), llm))
                    elif fault == "llm_stall":
                        runs.append(llm_stall(Path(tmp), llm))
                    else:
                        runs.append(kept_then_answered(Path(tmp), llm, args.probe_s,
                                                       fault=fault))
                finally:
                    llm.close()
        timed = {k for k, v in runs[0].items() if k.endswith("_s") or k == "seconds"}
        figures[fault] = {**runs[-1], **{f"{k}_median": statistics.median(r[k] for r in runs)
                                         for k in timed}}
    emit("faults", {"probe_s": args.probe_s, "runs": args.runs}, faults=figures)


if __name__ == "__main__":
    main()
