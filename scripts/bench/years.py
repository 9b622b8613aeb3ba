"""Years of use: recall, start-up, memory, backup and size on a store holding a heavy user's
five years.

The store (built once into --store DIR when DIR has no years.json; several GB: keep it under
/tmp) is filled the way scripts/bench/recall.py fills its own, with its generator
(recall.MemoryFill, recall.Corpus) and through the real schema (db.open_writer's migrations,
chalie.store.memory_writes): --messages transcript messages over --days on --channels
channels, --episodes episodes covering them in the Encoder's windows, --facts knowledge items
(a key said again supersedes the old value, so some facts have a history), and every item a
vector of the `hashed` embedder (made without running a model), stored in the vector space of
the server's default embedder (minilm, int8), so that the real server recalls over them and
has nothing to embed. The questions (recall.py's mix: 1-3 words of a stored item around
question words, --no-match-share with no stored word) are drawn at build time and kept in
years.json beside the data.

What is measured (each part with --only; every part by default):
- recall: `Recall.recall(conn, question, K)` in process, as recall.py measures it (its
  measure_recall: the same K, parts and the bit index's first read), --rounds times, and the
  same recalls' CPU time (this machine is shared: CPU time is what an idle one would take);
- startup: `python -m chalie serve` (tests/integration/harness.py's ServerProcess, with the
  stub LLM) on the store, seconds from spawn to the first 200 from GET /health and the
  process's CPU seconds by then, --starts times; with the resident memory once healthy, once
  the bit index is read (idle), and after --turns turns over /ws; and the seconds until the
  bit index was read. A clean stop marks the store sound (chalie.db.sound) and saves the bit
  index beside it: with --cold-first the first start goes without both, as after an upgrade
  or a crash (the whole file checked, every vector read);
- backup: `python -m chalie backup FILE` (chalie/store/backup.py), --backups times;
- size: the database file, per year of use (/ --years), and by part (SQLite's dbstat);
- retention: a copy of the store pruned as the Housekeeper prunes with
  store.transcript_days = --transcript-days (chalie.store.retention.prune "transcript", then
  incremental vacuum of every free page): the time it took, the size and recall after.

    .venv/bin/python scripts/bench/years.py --store /tmp/chalie-years [--only recall startup]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import _common
import recall as recall_bench
from _common import ROOT, emit, progress, summary
from startup import healthy, interpreter_s

from chalie.clock import SystemClock
from chalie.config_load import load_config
from chalie.memory.embedders import HashedEmbedder, build_embedder
from chalie.memory.recall import Recall
from chalie.store import db, retention
from chalie.store.memory_writes import ensure_space
from tests.conftest import write_config
from tests.integration import harness
from tests.integration.harness import ServerProcess, StubLlm

_common.quiet_logging()

MANIFEST = "years.json"
PARTS = ("recall", "startup", "backup", "size", "retention")
DAY_S = 86400.0
KEEP_DAYS = 100_000.0  # store.transcript_days that keeps every line, whatever the default


# -- the store --

def build(store: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The store in `store`/data, built now unless years.json says it was; its manifest."""
    manifest_file = store / MANIFEST
    if manifest_file.is_file():
        return dict(json.loads(manifest_file.read_text()))
    data = store / "data"
    if data.exists():  # a build that did not finish
        shutil.rmtree(data)
    data.mkdir(parents=True)
    t0 = time.perf_counter()
    config = load_config(None, env={})
    # The server's default embedder names the space; its vectors are made by `hashed` here.
    server_embedder = build_embedder(config.memory, config.llm, models_dir=data / "models")
    space = server_embedder.space
    server_embedder.close()
    rng = random.Random(args.random_seed)
    corpus = recall_bench.Corpus(rng, args.vocabulary)
    writer = db.open_writer(data, busy_timeout_ms=5000, synchronous="NORMAL")
    fill = recall_bench.MemoryFill(writer, corpus, channels=args.channels,
                                   window=config.memory.encode_every_rows, days=args.days,
                                   batch=args.batch)
    seconds: dict[str, float] = {}
    progress(f"building {args.messages} messages, {args.episodes} episodes, {args.facts} facts "
             f"into {data}")
    seconds["transcript"] = fill.add_messages(args.messages)
    progress(f"transcript stored in {seconds['transcript']:.0f}s")
    seconds["knowledge"] = fill.add_facts(args.facts)
    seconds["episodes"] = fill.add_episodes(args.episodes)
    progress(f"facts and episodes stored in {seconds['knowledge'] + seconds['episodes']:.0f}s")
    with db.immediate(writer):
        space_id = ensure_space(writer, space, fill.now)
    vectors = fill.embed(space_id, HashedEmbedder())
    progress(f"{vectors['vectors']} vectors stored in "
             f"{vectors['embed_s'] + vectors['store_vectors_s']:.0f}s")
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    counts = fill.counts()
    (superseded,) = writer.execute(
        "SELECT count(*) FROM knowledge WHERE superseded_at IS NOT NULL").fetchone()
    writer.close()
    manifest = {
        "params": {k: getattr(args, k) for k in ("messages", "episodes", "facts", "days",
                                                 "channels", "vocabulary", "batch",
                                                 "random_seed", "no_match_share")},
        "now": fill.now, "space": space, "space_id": space_id,
        "stored": {**counts, "knowledge_superseded": int(superseded),
                   "vectors": vectors["vectors"]},
        "build_s": {**{k: round(v, 1) for k, v in seconds.items()},
                    "embed": vectors["embed_s"], "store_vectors": vectors["store_vectors_s"],
                    "total": round(time.perf_counter() - t0, 1)},
        "questions": fill.questions(args.questions, args.no_match_share),
    }
    tmp = manifest_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest))
    tmp.replace(manifest_file)
    progress(f"built in {manifest['build_s']['total']:.0f}s")
    return manifest


def questions(manifest: dict[str, Any], n: int) -> list[tuple[str, bool]]:
    return [(str(q), bool(s)) for q, s in manifest["questions"][:n]]


# -- recall in process --

def measure_recall(data: Path, manifest: dict[str, Any], args: argparse.Namespace,
                   ) -> dict[str, Any]:
    memory = load_config(None, env={}).memory
    rounds = []
    for i in range(args.rounds):
        reader = db.connect(db.db_path(data), busy_timeout_ms=5000, readonly=True)
        recall = Recall(embedder=recall_bench.KnnHashedEmbedder(), space_id=manifest["space_id"],
                        config=memory, clock=SystemClock())
        asked = questions(manifest, args.queries)
        figures = recall_bench.measure_recall(reader, recall, HashedEmbedder(),
                                              manifest["space_id"], asked)
        # CPU time of the same recalls: what they would take on an idle machine, near
        # enough (this one is shared), unless they wait for the disk.
        cpu = []
        for text, _ in asked:
            t0 = time.thread_time()
            recall.recall(reader, text, recall_bench.K)
            cpu.append(time.thread_time() - t0)
        figures["recall_cpu_s"] = summary(cpu)
        reader.close()
        progress(f"recall round {i + 1}: p50 {figures['recall_s']['p50'] * 1000:.1f} ms, "
                 f"p90 {figures['recall_s']['p90'] * 1000:.1f} ms, CPU p50 "
                 f"{figures['recall_cpu_s']['p50'] * 1000:.1f} ms, parts "
                 f"{ {k: round(v * 1000, 1) for k, v in figures['parts_p50_s'].items()} }")
        rounds.append(figures)
    return {
        "recall_p50_s_median": round(statistics.median(r["recall_s"]["p50"] for r in rounds), 6),
        "recall_p90_s_median": round(statistics.median(r["recall_s"]["p90"] for r in rounds), 6),
        "recall_cpu_p50_s_median": round(
            statistics.median(r["recall_cpu_s"]["p50"] for r in rounds), 6),
        "rounds": rounds,
    }


# -- the real server --

def server_sections(data: Path, port: int) -> dict[str, dict[str, Any]]:
    return {
        "server": {"port": port},
        "store": {"path": str(data), "transcript_days": KEEP_DAYS},
        "memory": {"embedder": "minilm"},  # the default; the harness names "hashed"
    }


def _healthy_after(port: int, t0: float, timeout: float) -> tuple[threading.Thread,
                                                                   list[float]]:
    """A thread polling GET /health every 5 ms; the list gets the first 200's time - t0."""
    found: list[float] = []

    def poll() -> None:
        while time.perf_counter() - t0 < timeout:
            if healthy(port):
                found.append(time.perf_counter() - t0)
                return
            time.sleep(0.005)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    return poller, found


def _bit_index_read(server: ServerProcess, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = next((e for e in server.log_events() if e.get("event") == "bit_index_read"),
                     None)
        if found is not None:
            return found
        time.sleep(0.1)
    return None


def _take_turns(server: ServerProcess, manifest: dict[str, Any], turns: int) -> float:
    client = server.connect()
    t0 = time.perf_counter()
    for text, _ in questions(manifest, turns):
        client.send({"type": "chat", "text": text})
        while client.recv()["type"] != "done":
            pass
    return (time.perf_counter() - t0) / turns


def one_start(store: Path, data: Path, manifest: dict[str, Any],
              args: argparse.Namespace, turns: int) -> dict[str, Any]:
    """Start the server on the store; the seconds to a healthy /health, resident memory."""
    workdir = store / "run"
    workdir.mkdir(exist_ok=True)
    port = _common.free_port()
    stub = StubLlm()
    server = ServerProcess(workdir, stub, **server_sections(data, port))
    out: dict[str, Any] = {"marked_sound": db.db_path(data).with_name("chalie.db.sound").is_file()}
    t0 = time.perf_counter()
    poller, healthy_at = _healthy_after(port, t0, args.timeout)
    try:
        server.start()
        poller.join(args.timeout)
        if not healthy_at:
            out["error"] = f"not healthy within {args.timeout}s"
            return out
        out["start_s"] = round(healthy_at[0], 3)
        assert server.proc is not None
        pid = server.proc.pid
        cpu = _common.cpu_seconds(pid)  # what the start would take on an idle machine, nearly
        out["cpu_s_at_healthy"] = None if cpu is None else round(cpu, 3)
        out["rss_healthy_mib"] = _common.rss_mib(pid)
        read = _bit_index_read(server, args.timeout * 10)
        if read is not None:
            out["bit_index_read_s"] = read.get("s")
            out["bit_index_items"] = read.get("items")
            out["bit_index_ready_after_spawn_s"] = round(time.perf_counter() - t0, 1)
        time.sleep(args.idle_s)
        out["rss_idle_mib"] = _common.rss_mib(pid)
        if turns:
            out["turns"] = turns
            out["turn_s_mean"] = round(_take_turns(server, manifest, turns), 3)
            time.sleep(args.idle_s)
            out["rss_after_turns_mib"] = _common.rss_mib(pid)
        out["rss_peak_mib"] = _common.peak_rss_mib(pid)
        out["errors"] = [e.get("event") for e in server.errors()][:5]
    finally:
        if server.proc is not None:
            out["exit_code"] = server.stop()
            if out["exit_code"] != 0:
                out["log_tail"] = [line[:300] for line in server.lines[-5:]]
        stub.close()
    return out


def measure_startup(store: Path, data: Path, manifest: dict[str, Any],
                    args: argparse.Namespace) -> dict[str, Any]:
    harness.WAIT_S = args.timeout  # how long ServerProcess waits for "listening"
    if args.cold_first:  # as a store left by an older Chalie, or a crash: everything is read
        db_file = db.db_path(data)
        for path in (db_file.with_name(db_file.name + ".sound"),
                     *data.glob(db_file.name + ".bits-*")):
            path.unlink()
    runs = []
    for i in range(args.starts):
        run = one_start(store, data, manifest, args, args.turns)
        progress(f"start {i + 1}/{args.starts}: {run}")
        runs.append(run)
    ok = [r for r in runs if "start_s" in r]
    return {
        "start_s": summary((r["start_s"] for r in ok), 3),
        "start_s_marked_sound": summary((r["start_s"] for r in ok if r["marked_sound"]), 3),
        "cpu_s_at_healthy_marked_sound": summary(
            (r["cpu_s_at_healthy"] for r in ok if r["marked_sound"] and r["cpu_s_at_healthy"]),
            3),
        "rss_idle_mib": summary((r["rss_idle_mib"] for r in ok if r.get("rss_idle_mib")), 1),
        "python_import_chalie_s": interpreter_s(
            "import chalie.cli, chalie.server, chalie.edge.app", args.starts),
        "runs": runs,
    }


# -- backup --

def measure_backup(store: Path, data: Path, args: argparse.Namespace) -> dict[str, Any]:
    config = write_config(store, {"store": {"path": str(data)}})
    dest = store / "backup.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    times = []
    size = None
    for i in range(args.backups):
        dest.unlink(missing_ok=True)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "chalie", "backup", str(dest), "--config",
                               str(config)], cwd=ROOT, env=env, capture_output=True, text=True,
                              check=False)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            return {"error": done.stderr[-500:]}
        size = dest.stat().st_size
        progress(f"backup {i + 1}/{args.backups}: {times[-1]:.1f}s, {size / 2**30:.2f} GiB")
    dest.unlink(missing_ok=True)
    return {"backup_s": summary(times, 2), "backup_gib": round((size or 0) / 2**30, 3)}


# -- size --

GROUPS = (  # (part, table-name prefixes), the first that matches
    ("transcript", ("transcript",)),
    ("full_text", ("memory_fts",)),
    ("vectors", ("vectors",)),
    ("episodes", ("episodes",)),
    ("knowledge", ("knowledge",)),
)


def measure_size(data: Path, years: float) -> dict[str, Any]:
    path = db.db_path(data)
    conn = db.connect(path, busy_timeout_ms=5000, readonly=True)
    try:
        tables = dict(conn.execute("SELECT name, tbl_name FROM sqlite_schema"
                                   ).fetchall())  # an index -> its table
        parts: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = str(tables.get(name, name))
            part = next((p for p, prefixes in GROUPS if table.startswith(prefixes)), "other")
            parts[part] = parts.get(part, 0) + int(size)  # type: ignore[arg-type]
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()  # type: ignore[misc]
        (page,) = conn.execute("PRAGMA page_size").fetchone()  # type: ignore[misc]
    finally:
        conn.close()
    total = path.stat().st_size
    parts["free_pages"] = int(free) * int(page)
    return {
        "file_gib": round(total / 2**30, 3),
        "gib_per_year": round(total / 2**30 / years, 3),
        "by_part_gib": {k: round(v / 2**30, 3) for k, v in sorted(parts.items())},
        "by_part_gib_per_year": {k: round(v / 2**30 / years, 3) for k, v in sorted(parts.items())},
    }


# -- retention --

def measure_retention(store: Path, data: Path, manifest: dict[str, Any],
                      args: argparse.Namespace) -> dict[str, Any]:
    pruned = store / "pruned"
    if pruned.exists():
        shutil.rmtree(pruned)
    pruned.mkdir()
    t0 = time.perf_counter()
    shutil.copyfile(db.db_path(data), db.db_path(pruned))
    progress(f"store copied in {time.perf_counter() - t0:.0f}s; pruning")
    writer = db.open_writer(pruned, busy_timeout_ms=5000, synchronous="NORMAL")
    before = manifest["now"] - args.transcript_days * DAY_S
    deleted, t0 = 0, time.perf_counter()
    while True:
        with db.immediate(writer):
            step = retention.prune(writer, "transcript", before, args.prune_batch)
        deleted += step
        if step < args.prune_batch:
            break
    prune_s = time.perf_counter() - t0
    progress(f"{deleted} messages pruned in {prune_s:.0f}s; vacuuming")
    t0 = time.perf_counter()
    returned = 0
    while step := retention.incremental_vacuum(writer, 100_000):
        returned += step
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    vacuum_s = time.perf_counter() - t0
    (left,) = writer.execute("SELECT count(*) FROM transcript").fetchone()  # type: ignore[misc]
    writer.close()
    out = {
        "transcript_days": args.transcript_days,
        "messages_pruned": deleted, "messages_left": int(left),
        "prune_s": round(prune_s, 1), "pruned_per_s": round(deleted / max(prune_s, 1e-9)),
        "vacuum_s": round(vacuum_s, 1), "pages_returned": returned,
        "size": measure_size(pruned, args.years),
    }
    if "recall" in args.only:
        out["recall"] = measure_recall(pruned, manifest, args)
    shutil.rmtree(pruned)
    return out


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True,
                        help="directory of the store, built there when it has no years.json "
                             "(several GB: keep it under /tmp)")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS),
                        help="what to measure (all)")
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=20_000)
    parser.add_argument("--years", type=float, default=5.0, help="years of use (5)")
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--vocabulary", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=5000, help="rows per transaction (5000)")
    parser.add_argument("--questions", type=int, default=1000, help="questions kept (1000)")
    parser.add_argument("--no-match-share", type=float, default=0.2)
    parser.add_argument("--random-seed", type=int, default=1)
    parser.add_argument("--queries", type=int, default=200, help="recalls a round (200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of recalls (3)")
    parser.add_argument("--starts", type=int, default=3, help="server starts (3)")
    parser.add_argument("--turns", type=int, default=10,
                        help="turns over /ws after each start, for the memory they leave (10)")
    parser.add_argument("--cold-first", action="store_true",
                        help="the first start without the clean-stop mark and the saved bit "
                             "index (as after an upgrade or a crash): it reads everything")
    parser.add_argument("--idle-s", type=float, default=5.0,
                        help="seconds idle before the resident memory is read (5)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a start may take to a healthy /health (60)")
    parser.add_argument("--backups", type=int, default=2, help="backups taken (2)")
    parser.add_argument("--transcript-days", type=float, default=90.0,
                        help="store.transcript_days for the retention part (90)")
    parser.add_argument("--prune-batch", type=int, default=5000,
                        help="rows a prune step deletes (5000)")
    args = parser.parse_args()
    args.days = args.years * 365.25
    return args


def main() -> int:
    args = parse_args()
    # The server and the CLI run with bytecode caches, as an installed Chalie does: without
    # them (this variable is set in some sandboxes) every start compiles Chalie's modules
    # again, about a second of CPU.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    store = args.store.resolve()
    if store.is_relative_to(ROOT):
        sys.exit("years.py: --store must be outside the repository (it is several GB)")
    store.mkdir(parents=True, exist_ok=True)
    manifest = build(store, args)
    data = store / "data"
    load = os.getloadavg()
    figures: dict[str, Any] = {}
    if "size" in args.only:
        figures["size"] = measure_size(data, args.years)
        progress(f"size: {figures['size']}")
    if "recall" in args.only:
        figures["recall"] = measure_recall(data, manifest, args)
    if "startup" in args.only:
        figures["startup"] = measure_startup(store, data, manifest, args)
    if "backup" in args.only:
        figures["backup"] = measure_backup(store, data, args)
    if "retention" in args.only:
        figures["retention"] = measure_retention(store, data, manifest, args)
    emit("years", {"store": str(store), "only": args.only, **manifest["params"],
                   "queries": args.queries, "rounds": args.rounds, "starts": args.starts},
         stored=manifest["stored"], build_s=manifest["build_s"],
         load_average_before=[round(x, 2) for x in load],
         load_average_after=[round(x, 2) for x in os.getloadavg()], **figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
