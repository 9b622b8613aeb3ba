"""Turn overhead: N sequential chat turns over /ws against a stub LLM that answers instantly
(streaming its answer, as the server asks it to: client_first_delta_s is send -> first
message_delta frame).

What the server adds around the LLM call is what is left when the LLM costs (almost) nothing:
for every turn, response_time_s (from the `turn_stored` log line, the same figure as the
message frame's metrics.response_time_s: receipt of the frame to the stored answer) minus llm_s
(time inside LLM HTTP requests, as measured around the request, from `turn_finished`). The
client's own round trip (send -> `done` frame) is reported too: it adds the push and the socket.

With --prefill-episodes N --prefill-messages M the server starts on a store already holding
that much memory (made as scripts/bench/recall.py makes it: messages over several channels,
"main" among them, episodes covering them window by window, --prefill-facts knowledge items,
all embedded in the vector space the server uses), so every turn's recall runs at steady state;
the turns then ask questions about stored words instead of the fixed text. --reembed stores
those vectors under another space name, so the server re-embeds everything in the background
while the turns run: the turns that finished before it caught up (log line vector_space_stale,
the moment chalie_vectors_pending drops to 0) are reported on their own. --encode-every N sets
memory.encode_every_rows to N so episode encodings (the stub answers them instantly with
schema-valid filler) run throughout the measured turns; the turns that overlapped one are
reported on their own.

With --locomo CONVERSATION the store holds a LoCoMo conversation instead (imported and embedded
as scripts/bench/locomo.py does), and the turns ask its questions. The server runs the shipped
embedder unless --embedder says otherwise.

    .venv/bin/python scripts/bench/turn_overhead.py [--turns 500] [--warmup 20] [--locomo 26]
        [--prefill-episodes 10000 --prefill-messages 20000 --embedder hashed] [--reembed]
        [--encode-every 4] [--set memory.index_delay_s=5]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
import locomo
import locomo_data as ld
import recall as recall_bench
from _common import emit, log_problems, progress, scrape, summary, turn_events

from chalie.config_load import load_config
from chalie.memory.embedders import HashedEmbedder
from chalie.store import db
from tests.integration.harness import Client, ServerProcess, StubLlm, wait_for

_common.quiet_logging()

FIXED_TEXT = "benchmark turn {i}: what is the weather like?"
OLD_SPACE = "hashed-bench-old"  # --reembed: the prefilled vectors' space, not the server's
SHIPPED = load_config(None, env={}).memory  # config/chalie.toml's embedder, not the harness's


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=500, help="measured turns (default 500)")
    parser.add_argument("--warmup", type=int, default=20,
                        help="turns before measuring, not reported (default 20)")
    parser.add_argument("--max-seconds", type=float, default=600.0,
                        help="stop early (and say so) past this wall time (default 600)")
    parser.add_argument("--prefill-episodes", type=int, default=0,
                        help="episodes in the store before the server starts (default 0)")
    parser.add_argument("--prefill-messages", type=int, default=0,
                        help="transcript messages in the store before the server starts "
                             "(default 0)")
    parser.add_argument("--prefill-facts", type=int, default=1000,
                        help="knowledge items stored with a prefill (default 1000; none "
                             "without one)")
    parser.add_argument("--prefill-channels", type=int, default=8,
                        help="channels the prefilled messages were said on, \"main\" (the "
                             "bench's) among them (default 8)")
    parser.add_argument("--reembed", action="store_true",
                        help="prefilled vectors are in another space: the server re-embeds "
                             "everything while the turns run")
    parser.add_argument("--encode-every", type=int, default=0,
                        help="memory.encode_every_rows for the server (default 0: the "
                             "configured default)")
    parser.add_argument("--locomo", metavar="CONVERSATION",
                        help="a LoCoMo conversation stored first (a file name in "
                             f"{locomo.DEFAULT_DATA}, without .json: 26): imported with "
                             "`chalie import` as scripts/bench/locomo.py does, every line "
                             "embedded before the first turn; the turns ask its questions")
    parser.add_argument("--embedder", default=SHIPPED.embedder,
                        help=f"memory.embedder for the server (default {SHIPPED.embedder}, as "
                             "shipped; minilm builds its ONNX file in the run's data "
                             "directory first; hashed is what was measured before issue 22)")
    parser.add_argument("--embed-threads", type=int, default=SHIPPED.embed_threads,
                        help="memory.embed_threads, for --embedder minilm (default "
                             f"{SHIPPED.embed_threads}, as shipped)")
    parser.add_argument("--pause-s", type=float, default=0.0,
                        help="seconds between one turn's done and the next message (default 0)")
    parser.add_argument("--embed-precision", default=SHIPPED.embed_precision,
                        choices=["float32", "int8"],
                        help="memory.embed_precision, for --embedder minilm (default "
                             f"{SHIPPED.embed_precision}, as shipped)")
    parser.add_argument("--no-match-share", type=float, default=0.2,
                        help="with a prefill, share of questions without any stored word (0.2)")
    parser.add_argument("--random-seed", type=int, default=1)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a config override for the server "
                        "(TOML value, else a string), e.g. memory.index_delay_s=5; repeatable")
    args = parser.parse_args()
    if args.reembed and not (args.prefill_episodes or args.prefill_messages):
        parser.error("--reembed needs a prefill (--prefill-episodes, --prefill-messages)")
    if (args.prefill_episodes or args.prefill_messages) and not args.reembed \
            and args.embedder != HashedEmbedder.kind:
        parser.error("--prefill-* stores hashed vectors: add --embedder hashed (or --reembed, "
                     "and the server embeds it all again)")
    if args.locomo and (args.prefill_episodes or args.prefill_messages):
        parser.error("--locomo stores a conversation of its own: leave out --prefill-*")
    if args.locomo and not (locomo.DEFAULT_DATA / f"{args.locomo}.json").is_file():
        parser.error(f"--locomo: no {args.locomo}.json in {locomo.DEFAULT_DATA}")
    return args


class Run:
    """What one run of sequential turns saw."""

    def __init__(self) -> None:
        self.client_rtt: list[float] = []
        self.first_delta: list[float] = []  # send -> the first message_delta frame
        self.measured_ids: list[str] = []
        self.frame_errors = 0
        self.stopped_early = False
        self.wall = 0.0
        self.events: list[dict[str, Any]] = []
        self.rss: float | None = None
        self.rss_now: float | None = None  # VmRSS once the turns are done
        self.server_cpu_s: float | None = None
        self.exit_code: int | None = None
        self.prefill: dict[str, Any] | None = None
        self.metrics_start: dict[str, float] = {}
        self.metrics_end: dict[str, float] = {}
        self.sample_texts: list[str] = []


def prefill(db_path: Path, args: argparse.Namespace) -> tuple[recall_bench.MemoryFill,
                                                               dict[str, Any]]:
    """Fill the database the server will open, as recall.py fills its store."""
    t0 = time.perf_counter()
    rng = random.Random(args.random_seed)
    corpus = recall_bench.Corpus(rng, 10_000)
    embedder = HashedEmbedder()
    writer = db.open_writer(db_path.parent, busy_timeout_ms=5000, synchronous="NORMAL")
    try:
        fill, info = recall_bench.fill_store(
            writer, corpus, messages=args.prefill_messages, episodes=args.prefill_episodes,
            facts=args.prefill_facts, channels=args.prefill_channels, days=365.0, batch=5000,
            space=OLD_SPACE if args.reembed else embedder.space, embedder=embedder)
    finally:
        writer.close()
    info["seconds"] = round(time.perf_counter() - t0, 2)
    info["db_mib"] = round(db_path.stat().st_size / 2**20, 1)
    return fill, info


def take_turns(server: ServerProcess, client: Client, texts: list[str],
               args: argparse.Namespace, out: Run) -> int:
    """Send the turns one after the other; returns how many were done."""
    deadline = time.monotonic() + args.max_seconds
    done = 0
    for i, text in enumerate(texts):
        if time.monotonic() > deadline:
            out.stopped_early = True
            break
        if i == args.warmup:
            out.metrics_start = scrape(server.url)
        if i and args.pause_s > 0:
            time.sleep(args.pause_s)  # a person's pace: background work settles in between
        t0 = time.perf_counter()
        client.send({"type": "chat", "text": text})
        frames, first_delta = [], None
        while not frames or frames[-1]["type"] != "done":
            frames.append(client.recv())
            if first_delta is None and frames[-1]["type"] == "message_delta":
                first_delta = time.perf_counter() - t0
        rtt = time.perf_counter() - t0
        done += 1
        if any(f["type"] == "error" for f in frames):
            out.frame_errors += 1
        if i >= args.warmup:
            out.client_rtt.append(rtt)
            if first_delta is not None:
                out.first_delta.append(first_delta)
            out.measured_ids.append(frames[-1]["exchange_id"])
        if done % 100 == 0:
            progress(f"{done}/{len(texts)} turns")
    return done


def run(args: argparse.Namespace) -> Run:
    stub = StubLlm()
    workdir = Path(tempfile.mkdtemp(prefix="chalie-bench-overhead-"))
    sections = locomo.overrides(args.overrides)
    sections.setdefault("log", {}).setdefault("level", "info")
    sections["memory"] = {"embedder": args.embedder, "embed_precision": args.embed_precision,
                          "embed_threads": args.embed_threads, **sections.get("memory", {})}
    if args.encode_every > 0:
        sections["memory"].update({"encode_every_rows": args.encode_every,
                                   "encode_max_rows": max(50, args.encode_every)})
    server = ServerProcess(workdir, stub, **sections)
    out = Run()
    total = args.warmup + args.turns
    texts = [FIXED_TEXT.format(i=i) for i in range(total)]
    try:
        if args.prefill_episodes or args.prefill_messages:
            progress(f"prefilling {args.prefill_messages} messages, {args.prefill_episodes} "
                     f"episodes, {args.prefill_facts} facts")
            fill, out.prefill = prefill(server.db_path, args)
            progress(f"prefilled in {out.prefill['seconds']}s "
                     f"({out.prefill['db_mib']} MiB)")
            texts = [q for q, _ in fill.questions(total, args.no_match_share)]
        conversation = None
        if args.locomo:
            conversation = ld.load(locomo.DEFAULT_DATA / f"{args.locomo}.json")
            progress(f"importing LoCoMo conversation {args.locomo} "
                     f"({len(conversation.lines)} lines)")
            locomo.chalie_import(server, conversation, workdir)
            asked = [q.text for q in conversation.questions]
            texts = [asked[i % len(asked)] for i in range(total)]  # again from the first
        out.sample_texts = texts[args.warmup:args.warmup + 3]
        server.start()
        if conversation is not None:
            locomo.wait_embedded(server.url, len(conversation.lines))
        client = server.connect(deltas=True)
        assert server.proc is not None
        cpu0 = _common.cpu_seconds(server.proc.pid)
        started = time.monotonic()
        done = take_turns(server, client, texts, args, out)
        out.wall = time.monotonic() - started
        cpu1 = _common.cpu_seconds(server.proc.pid)
        out.metrics_end = scrape(server.url)
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
        out.rss_now = _common.rss_mib(server.proc.pid) if server.proc else None
    finally:
        out.exit_code = server.stop() if server.proc is not None else None
        stub.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return out


def subset(found: dict[str, dict[str, Any]], ids: list[str],
           rtt: dict[str, float]) -> dict[str, Any]:
    picked = [found[t] for t in ids]
    return {
        "turns": len(picked),
        "response_time_s": summary(e["response_time_s"] for e in picked),
        "outside_llm_s": summary(e["response_time_s"] - e["llm_s"] for e in picked),
        "client_round_trip_s": summary(rtt[t] for t in ids if t in rtt),
    }


def metric(sample: dict[str, float], name: str) -> float | None:
    value = sample.get(name)
    return None if value is None else round(value, 6)


def encodings_by_outcome(sample: dict[str, float]) -> dict[str, float]:
    return {k.split('"')[1]: v for k, v in sample.items()
            if k.startswith("chalie_encodings_total{")}


def background_figures(args: argparse.Namespace, r: Run, by_id: dict[str, dict[str, Any]],
                       ) -> dict[str, Any]:
    """The re-embed and encoding figures: gauges and counters from /metrics, and the turns
    that ran while the background work did."""
    found_ids = [t for t in r.measured_ids if t in by_id]
    rtt = dict(zip(r.measured_ids, r.client_rtt, strict=True))
    spans = _common.turn_spans(r.events, by_id, found_ids)
    out: dict[str, Any] = {}
    end = r.metrics_end
    if args.reembed:
        stale = [_common.stamp(e) for e in r.events if e.get("event") == "vector_space_stale"]
        caught_up = min(stale) if stale else float("inf")
        during = [t for t in found_ids if t in spans and spans[t][1] < caught_up]
        drops = [_common.stamp(e) for e in r.events if e.get("event") == "vector_space_dropped"]
        dropped = min(drops) if drops else float("inf")
        dropping = [t for t in found_ids if t in spans and spans[t][1] >= caught_up
                    and spans[t][0] < dropped]
        first = min((s for s, _ in spans.values()), default=None)
        out["reembed"] = {
            "pending_at_start": metric(r.metrics_start, "chalie_vectors_pending"),
            "pending_at_end": metric(end, "chalie_vectors_pending"),
            "caught_up": bool(stale),
            "caught_up_after_first_measured_turn_s": (
                round(caught_up - first, 3) if stale and first is not None else None),
            "old_space_dropped": bool(drops),
            "old_space_dropped_after_caught_up_s": (
                round(dropped - caught_up, 3) if drops and stale else None),
            "embeddings_total": metric(end, 'chalie_embeddings_total{result="ok"}'),
            "while_reembedding": subset(by_id, during, rtt),
            "while_dropping_old_space": subset(by_id, dropping, rtt),
        }
    if args.encode_every > 0:
        busy = _common.encodings(r.events)
        during = [t for t in found_ids if t in spans and any(
            spans[t][0] < b_end and spans[t][1] > b_start for b_start, b_end in busy)]
        out["encoding"] = {
            "encode_every_rows": args.encode_every,
            "encodings_total": encodings_by_outcome(end),
            "encodings_total_at_start": encodings_by_outcome(r.metrics_start),
            "episodes_total": metric(end, "chalie_episodes_total"),
            "episodes_total_at_start": metric(r.metrics_start, "chalie_episodes_total"),
            "encodings_logged": len(busy),
            "while_encoding": subset(by_id, during, rtt),
        }
    count = end.get("chalie_recall_seconds_count")
    recalled = [e["recalled"] for e in r.events
                if e.get("event") == "context_ready" and "recalled" in e]
    out["server_recall"] = {
        "recalls": int(count) if count is not None else None,
        "mean_s": round(end["chalie_recall_seconds_sum"] / count, 6) if count else None,
        "degraded_total": metric(end, "chalie_recall_degraded_total"),
        "items_in_prompt_p50": sorted(recalled)[len(recalled) // 2] if recalled else None,
        "vectors_pending_at_end": metric(end, "chalie_vectors_pending"),
    }
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
    prefilled = bool(args.prefill_episodes or args.prefill_messages)
    emit(
        "turn_overhead",
        {"turns": args.turns, "warmup": args.warmup, "llm": "stub on loopback, instant",
         "config": "defaults (history_turns 40, act.workers 16, store.synchronous FULL)"
                   + (f", memory.encode_every_rows {args.encode_every}"
                      if args.encode_every > 0 else ""),
         "prefill_episodes": args.prefill_episodes, "prefill_messages": args.prefill_messages,
         "prefill_facts": args.prefill_facts if prefilled else 0,
         "prefill_channels": args.prefill_channels if prefilled else 0,
         "locomo": args.locomo,
         "reembed": args.reembed, "encode_every": args.encode_every,
         "embedder": args.embedder, "embed_precision": args.embed_precision,
         "embed_threads": args.embed_threads, "pause_s": args.pause_s, "set": args.overrides,
         "turn_text": (f"LoCoMo conversation {args.locomo}'s questions" if args.locomo
                       else f"questions about stored words ({args.no_match_share:.0%} without "
                            "one)" if prefilled else FIXED_TEXT),
         "random_seed": args.random_seed},
        turns_measured=len(found),
        stopped_early=r.stopped_early,
        response_time_s=summary(response),
        llm_s=summary(e["llm_s"] for e in found),
        outside_llm_s=summary(outside),
        outside_llm_share=summary(share, digits=3),
        client_round_trip_s=summary(r.client_rtt),
        client_first_delta_s=summary(r.first_delta),
        client_after_server_s=summary(after_finish),
        server_store_wait_s=summary(_common.store_waits(r.events, r.measured_ids)),
        server_context_s=summary(_common.context_seconds(r.events, r.measured_ids)),
        phases_p50_ms=_common.turn_phases(r.events, r.measured_ids),
        turns_per_s=round(len(r.client_rtt) / r.wall, 1) if r.wall > 0 else None,
        server_cpu_s_per_turn=round(r.server_cpu_s, 5) if r.server_cpu_s is not None else None,
        error_frames=r.frame_errors,
        prefill=r.prefill,
        sample_texts=r.sample_texts,
        **background_figures(args, r, by_id),
        server_log=log_problems(r.events),
        server_peak_rss_mib=r.rss,
        server_rss_after_mib=r.rss_now,
        server_exit_code=r.exit_code,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
