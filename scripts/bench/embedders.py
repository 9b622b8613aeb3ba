"""Embedders side by side: the cost of a query, of background batches, of memory and of the
first start, for memory.embedder = "hashed" and "minilm" (float32 and int8).

Each embedder runs in a fresh process (so resident-memory figures are its own): VmRSS before
anything is imported, after the embedder is built and has embedded one text ("loaded"), and
after the batches; a query is a short question, embedded alone (--queries times; median wall
time and the CPU time of the calling thread); a batch is --batch sentences of this checkout's
documentation (docs/*.md, 20-300 characters) in one embed() call (median ms per line).
"minilm" is built first in a fresh models folder (the seconds of that conversion are reported)
and then loaded from it, as a second start does. Threads: memory.embed_threads (--threads).

    .venv/bin/python scripts/bench/embedders.py [--queries 200] [--batch 64] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
from _common import ROOT, emit, progress

QUERY = "What fields would Caroline pursue in her education?"
KINDS = (("hashed", "float32"), ("minilm", "float32"), ("minilm", "int8"))


def rss_now() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def lines() -> list[str]:
    text = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    found = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n", text)]
    return [s for s in found if 20 < len(s) < 300]


def child(kind: str, precision: str, models: str, *, queries: int, batch: int,
          threads: int) -> dict[str, Any]:
    """In the measuring process: build, warm, time, and report."""
    base = rss_now()
    import msgspec  # noqa: PLC0415  (imported after the first figure on purpose)

    from chalie.config_load import load_config  # noqa: PLC0415

    config = load_config()
    memory = msgspec.structs.replace(config.memory, embedder=kind, embed_precision=precision,
                                     embed_threads=threads, embed_weights_url="")
    from chalie.memory.embedders import build_embedder  # noqa: PLC0415

    started = time.perf_counter()
    embedder = build_embedder(memory, config.llm, models_dir=Path(models))
    embedder.embed([QUERY], timeout_s=30.0)
    load_s = time.perf_counter() - started
    loaded = rss_now()
    wall, cpu = [], []
    for _ in range(queries):
        w, c = time.perf_counter(), time.thread_time()
        embedder.embed([QUERY], timeout_s=30.0)
        wall.append((time.perf_counter() - w) * 1000)
        cpu.append((time.thread_time() - c) * 1000)
    texts = lines()
    per_line = []
    for start in range(0, len(texts) - batch + 1, batch):
        chunk = texts[start:start + batch]
        w = time.perf_counter()
        embedder.embed(chunk, timeout_s=300.0)
        per_line.append((time.perf_counter() - w) * 1000 / len(chunk))
    return {"embedder": kind, "precision": precision if kind == "minilm" else None,
            "space": embedder.space, "origin": embedder.origin,
            "load_s": round(load_s, 3),
            "query_ms_p50": round(statistics.median(wall), 3),
            "query_cpu_ms_p50": round(statistics.median(cpu), 3),
            "batch_ms_per_line_p50": round(statistics.median(per_line), 3) if per_line else None,
            "rss_base_mib": round(base, 1), "rss_loaded_mib": round(loaded - base, 1),
            "rss_after_batches_mib": round(rss_now() - base, 1)}


def measure(kind: str, precision: str, models: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, precision, str(models),
               "--queries", str(args.queries), "--batch", str(args.batch),
               "--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", nargs=3, metavar=("KIND", "PRECISION", "MODELS"))
    args = parser.parse_args()
    if args.child:
        kind, precision, models = args.child
        print(json.dumps(child(kind, precision, models, queries=args.queries, batch=args.batch,
                               threads=args.threads)))
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="chalie-bench-embed-") as tmp:
        for kind, precision in KINDS:
            models = Path(tmp) / f"{kind}-{precision}"
            progress(f"{kind} {precision}: first start (builds the model)")
            first = measure(kind, precision, models, args)
            progress(f"{kind} {precision}: second start")
            result = measure(kind, precision, models, args)
            result["first_start_s"] = first["load_s"]
            result["model_file_mib"] = round(sum(
                p.stat().st_size for p in models.glob("*.onnx")) / 2**20, 1) if kind != "hashed" \
                else None
            results.append(result)
    emit("embedders", {"queries": args.queries, "batch": args.batch, "threads": args.threads,
                       "query": QUERY}, results=results)


_common.quiet_logging()
if __name__ == "__main__":
    main()
