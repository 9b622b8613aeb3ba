"""LoCoMo recall: does the first LLM request of a turn carry the conversation lines that answer
the question?

Data: LoCoMo, from Maharana, Lee, Tulyakov, Bansal, Barbieri and Fang, "Evaluating Very
Long-Term Conversational Memory of LLM Agents", ACL 2024 (snap-research/locomo; CC BY-NC 4.0).
Five conversations are read from ../shared/bench-data/locomo/ (from the repository's root; see
its README.md) or --data DIR; they are never copied into the repository.

Protocol, per conversation and per context window (scripts/bench/locomo_data.py has the line,
export, evidence and baseline parts):
1. The conversation's dialog lines are imported with the real `chalie import` CLI into a fresh
   data dir: one message of the person's (role user) per line on the channel "main", text
   "<speaker>: <line>" (plus " [shares a photo: <caption>]"), created at its session's date
   (UTC) plus 30 s per line index; the channel's encoding mark is at the last line, so the
   encoder makes no episodes of them.
2. The server starts against the harness's stub LLM (tests/integration/harness.py; the DMN is
   off there) and the benchmark waits until every line is embedded (chalie_embeddings_total ok
   reaches the line count and chalie_vectors_pending is 0 on /metrics).
3. Each question of categories 1-4 (5, adversarial, is left out) is sent over one /ws socket on
   the channel "main" as a chat, one after another; the stub answers each with "stub answer".
   The judged request of a turn is the first request the stub saw after the chat was sent that
   carries no response_format (the encoder's requests do) and whose "person's message" section
   (prompts/act_user.md) is the question.
4. A question is found when every evidence line (its first 80 characters, casefolded, runs of
   whitespace folded) is in that request's text (all message contents, the system prompt too,
   folded alike). Evidence ids that name no line are skipped; a question left with none is
   skipped and counted apart.
5. Two baselines on the same lines with the memory section's own budget
   (chalie.memory.assembly.budgets(window, reply_reserve, shares).memory of the server's
   config; tokens by chalie.llm.types.estimate_tokens): BM25 (SQLite FTS5, porter tokenizer,
   the question's words quoted and OR'd, lines in bm25 order while they fit) and the newest
   lines (newest first while they fit). A baseline finds a question when its selection holds
   every evidence line.
Also reported: the judged requests' size (estimate_tokens), the context sections' token use
(the server's context_ready log line), the turn overhead (response_time_s - llm_s per turn, as
scripts/bench/turn_overhead.py computes it) and the time each phase took. The server runs with
the shipped defaults (the default embedder included, not the test harness's hashed one) but
for what --set changes. All five conversations at both windows take about seven minutes on 2
cores with the default embedder, a minute with memory.embedder=hashed (no LLM, no network).

--haystack: the same protocol once per window on one store holding every conversation given
(--conversations, whose questions are asked, and --distractors, whose lines join the store but
whose questions are not), as a person's years would be: one store, one channel ("main"), the
lines of all of them in time order (locomo_data.haystack; they overlap in time, 2022 to 2024,
and interleave), ids qualified by conversation ("26/D1:1"), and every question asked on that
channel, one after another. One channel and not one each: a person talks to Chalie where they
talk (the web page's "main"), not in a thread per person they mention, so the lines of years
end up in one channel whose history section shows only the newest of them; what is older has
to come through recall, as it must after a year of use. (One channel each, with each
conversation's questions asked on its own, would hand every conversation its own newest lines
in the history section and measure less of that.) The baselines choose from every line of the
store, the distractors' included, on the same memory budget. All ten LoCoMo conversations in
one store are 5,882 lines (about 238k tokens); embedding them takes minutes on 2 cores, so the
wait fails only once no line has been embedded for EMBED_STALL_S, and a turn may take
TURN_TIMEOUT_S.

    .venv/bin/python scripts/bench/locomo.py [--conversations 26,30] [--windows 8192,32768]
        [--set memory.recall_k=24] [--limit 20] [--dump DIR] [--json FILE] [--data DIR]
    .venv/bin/python scripts/bench/locomo.py --haystack [--conversations 26,30]
        [--distractors 41,42,43] [--windows 8192,32768] [...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import _common
import locomo_data as ld
import locomo_report as report
from _common import progress, scrape, turn_events

from chalie.config_load import load_config
from chalie.llm.types import estimate_tokens
from chalie.memory.assembly import SECTIONS, budgets
from tests.integration import harness
from tests.integration.harness import ServerProcess, StubLlm, wait_for

DEFAULT_EMBEDDER = load_config(None, env={}).memory.embedder

_common.quiet_logging()

CHANNEL = "main"
DEFAULT_DATA = _common.ROOT.parent / "shared" / "bench-data" / "locomo"
EMBED_STALL_S = 600.0  # the embedding wait fails once no line was embedded for this long
IMPORT_TIMEOUT_S = 1800.0
TURN_TIMEOUT_S = 300.0  # a /ws read waits this long for a turn's next frame
# The harness waits WAIT_S (20 s) for a server to listen and to stop: a fresh data dir's first
# start builds the ONNX model (a minute on a busy 2-core box), and a big store stops slower.
harness.WAIT_S = 300.0
# The ONNX model the first server built (<data>/models), put into each later fresh data dir.
MODELS = Path(tempfile.gettempdir()) / f"chalie-locomo-models-{os.getpid()}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="the LoCoMo conversations (default ../shared/bench-data/locomo)")
    parser.add_argument("--conversations", default="",
                        help="file stems, comma-separated (default: every .json in --data)")
    parser.add_argument("--windows", default="8192,32768",
                        help="llm.context_window of each server run (default 8192,32768)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a config override for the server "
                        "(TOML value, else a string), e.g. memory.embedder=hashed; repeatable")
    parser.add_argument("--haystack", action="store_true",
                        help="every conversation in one store, asked once per window "
                        "(default: a fresh store per conversation)")
    parser.add_argument("--distractors", default="",
                        help="with --haystack: conversations (file stems, comma-separated) "
                        "whose lines join the store but whose questions are not asked")
    parser.add_argument("--limit", type=int, default=0,
                        help="questions per conversation (default: all)")
    parser.add_argument("--dump", type=Path, help="write each judged request here")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = parser.parse_args()
    args.windows = [int(w) for w in args.windows.split(",") if w.strip()]
    args.distractors = [n.strip() for n in args.distractors.split(",") if n.strip()]
    if args.distractors and not args.haystack:
        parser.error("--distractors: only with --haystack")
    args.conversations = [n.strip() for n in args.conversations.split(",") if n.strip()] \
        or sorted(p.stem for p in args.data.glob("*.json") if p.stem not in args.distractors)
    if not args.conversations:
        parser.error(f"--data: no LoCoMo conversation (*.json) in {args.data}")
    for flag, names in (("--conversations", args.conversations),
                        ("--distractors", args.distractors)):
        for name in names:
            if not (args.data / f"{name}.json").is_file():
                parser.error(f"{flag}: no {name}.json in {args.data} (see --data)")
    both = sorted(set(args.conversations) & set(args.distractors))
    if both:
        parser.error(f"--distractors: {', '.join(both)} also asked (--conversations)")
    return args


def overrides(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """--set KEY=VALUE pairs as config sections ("llm.primary.model=x" nests)."""
    sections: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or "." not in key:
            raise SystemExit(f"--set {pair!r}: expected SECTION.KEY=VALUE")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        *path, leaf = key.split(".")
        target = sections
        for part in path:
            target = target.setdefault(part, {})
        target[leaf] = value
    return sections


@dataclass
class Judged:
    """One question in one server run."""

    conversation: str
    number: int
    category: int
    chalie: bool
    bm25: bool
    newest: bool
    judged: bool  # the turn's first request was identified
    bm25_turn: bool  # BM25 with the memory budget Chalie's context had in that turn
    turn_id: str | None
    prompt_tokens: int | None
    where: dict[str, str] = field(default_factory=dict)  # evidence id -> memory/history/...


@dataclass
class RunResult:
    conversation: str
    window: int
    memory_budget: int
    questions: list[Judged]
    phases: dict[str, float]
    sections: list[dict[str, int]]  # context_ready tokens of the judged turns
    overhead: list[float]  # response_time_s - llm_s of the judged turns
    context_s: list[float]  # context_ready's ms (the context job on the pool), in seconds
    error_frames: int
    log_problems: dict[str, Any]
    encoder_requests: int


def questions_of(conversation: ld.Conversation, args: argparse.Namespace) -> list[ld.Question]:
    """The questions a run asks: the first --limit of a conversation (a haystack has them per
    conversation already)."""
    if args.haystack:
        return list(conversation.questions)
    return list(conversation.questions)[:args.limit or None]


def person_marker() -> tuple[str, str]:
    """What surrounds the person's message in the turn prompt (prompts/act_user.md)."""
    template = (_common.ROOT / "prompts" / "act_user.md").read_text(encoding="utf-8")
    before = template.split("$user_text")[0].rsplit("$", 1)[1].split("\n", 1)[1]
    after = template.split("$user_text")[1].split("$")[0]
    return ld.fold(before), ld.fold(after)


def judged_request(bodies: list[dict[str, Any]], question: str,
                   marker: tuple[str, str]) -> dict[str, Any] | None:
    """The first request of the turn that asked `question`."""
    wanted = f"{marker[0]} {ld.fold(question)} {marker[1]}"
    for body in bodies:
        if body.get("response_format") is None \
                and wanted in ld.fold(ld.request_text(body)):
            return body
    return None


def where_found(folded: str, evidence_text: str) -> str:
    """Which part of the folded request holds the evidence line: memory, history, other."""
    at = folded.find(ld.needle(evidence_text))
    if at < 0:
        return "absent"
    headings = {"memory": folded.find(ld.fold("# What you remember that may matter here")),
                "history": folded.find(ld.fold("# Conversation so far"))}
    before = [(start, name) for name, start in headings.items() if 0 <= start < at]
    return max(before)[1] if before else "other"


def embedded(url: str, lines: int) -> bool:
    m = scrape(url)
    return m.get('chalie_embeddings_total{result="ok"}', 0) >= lines \
        and m.get("chalie_vectors_pending", 1) == 0


def wait_embedded(url: str, lines: int) -> None:
    """Until every line is embedded; an AssertionError once none was for EMBED_STALL_S."""
    last, moved = -1.0, time.monotonic()
    said = moved
    while not embedded(url, lines):
        done = scrape(url).get('chalie_embeddings_total{result="ok"}', 0)
        now = time.monotonic()
        if done > last:
            last, moved = done, now
        elif now - moved > EMBED_STALL_S:
            raise AssertionError(f"embedding stalled at {done:.0f} of {lines} lines")
        if now - said > 60:
            progress(f"  embedded {done:.0f} of {lines} lines")
            said = now
        time.sleep(1.0)


def chalie_import(server: ServerProcess, conversation: ld.Conversation, workdir: Path) -> None:
    """The lines into the server's fresh data dir with the real CLI."""
    export = workdir / "locomo.jsonl"
    export.write_text("\n".join(ld.export_lines(conversation.lines, CHANNEL, time.time()))
                      + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    done = subprocess.run([sys.executable, "-m", "chalie", "import", str(export),
                           "--config", str(server.config_path)], cwd=_common.ROOT, env=env,
                          capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"chalie import failed ({done.returncode}): {done.stderr.strip()}")


def start(server: ServerProcess, workdir: Path) -> None:
    """Start the server on its fresh data dir with the model an earlier one built."""
    models = workdir / "data" / "models"
    if MODELS.is_dir() and not models.exists():
        shutil.copytree(MODELS, models)
    server.start()
    if not MODELS.is_dir() and models.is_dir():
        shutil.copytree(models, MODELS)


def stop(server: ServerProcess) -> None:
    """SIGTERM, and SIGKILL when a big store's shutdown outlasts the harness's wait."""
    if server.proc is None:
        return
    try:
        server.stop()
    except subprocess.TimeoutExpired:
        progress("the server did not stop in time; killed")
        server.kill()


def memory_budget(config_path: Path) -> int:
    """The memory section's tokens in the server's own config."""
    config = load_config(config_path)
    primary = config.llm.job("primary")
    assert primary is not None  # a job's own settings always resolve; only a fallback may not
    shares = {name: float(getattr(config.context, name)) for name in SECTIONS}
    return budgets(primary.context_window, config.context.reply_reserve, shares).memory


def server_for(window: int, args: argparse.Namespace, workdir: Path,
               stub: StubLlm) -> ServerProcess:
    sections = overrides(args.overrides)
    sections.setdefault("llm", {})["context_window"] = window
    sections.setdefault("log", {}).setdefault("level", "info")
    # The shipped default embedder, not the test harness's (hashed, for speed).
    sections.setdefault("memory", {}).setdefault("embedder", DEFAULT_EMBEDDER)
    return ServerProcess(workdir, stub, **sections)  # type: ignore[arg-type]


def fill(server: ServerProcess, conversation: ld.Conversation, workdir: Path,
         stored: Path | None, phases: dict[str, float]) -> None:
    """Import the lines (or copy a store that holds them embedded), start the server and wait
    until every line is embedded."""
    t0 = time.perf_counter()
    if stored is None:
        chalie_import(server, conversation, workdir)
        phases["import_s"] = time.perf_counter() - t0
    else:
        shutil.copytree(stored, workdir / "data", dirs_exist_ok=True)
        phases["copy_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    start(server, workdir)
    phases["start_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if stored is None:
        wait_embedded(server.url, len(conversation.lines))
    else:
        wait_for(lambda: scrape(server.url).get("chalie_vectors_pending", 1) == 0, 60)
    phases["embed_s"] = time.perf_counter() - t0


def prepare(conversation: ld.Conversation, args: argparse.Namespace,
            stub: StubLlm) -> tuple[Path, dict[str, float]]:
    """A haystack's store, imported and embedded once (a server run with no question asked),
    for each window's run to start from a copy of; its data dir and the phases it took."""
    workdir = Path(tempfile.mkdtemp(prefix=f"chalie-locomo-{conversation.name}-store-"))
    server = server_for(args.windows[0], args, workdir, stub)
    phases: dict[str, float] = {}
    try:
        fill(server, conversation, workdir, None, phases)
    finally:
        stop(server)
    return workdir / "data", {f"store_{k}": round(v, 3) for k, v in phases.items()}


def run(conversation: ld.Conversation, window: int, args: argparse.Namespace,
        stub: StubLlm, marker: tuple[str, str], *, stored: Path | None = None) -> RunResult:
    """One fresh store (a copy of `stored` when given), one server, every question of the
    conversation."""
    workdir = Path(tempfile.mkdtemp(prefix=f"chalie-locomo-{conversation.name}-"))
    server = server_for(window, args, workdir, stub)
    questions = questions_of(conversation, args)
    budget = memory_budget(server.config_path)
    phases: dict[str, float] = {}
    stub.requests.clear()
    asked: list[tuple[ld.Question, dict[str, Any] | None, str | None]] = []
    errors = 0
    try:
        fill(server, conversation, workdir, stored, phases)
        t0 = time.perf_counter()
        client = server.connect(channel=CHANNEL)
        client.ws.settimeout(TURN_TIMEOUT_S)
        for q in questions:
            mark = len(stub.requests)
            frames = client.turn(q.text)
            errors += sum(f["type"] == "error" for f in frames)
            body = judged_request(stub.requests[mark:], q.text, marker)
            asked.append((q, body, frames[-1].get("exchange_id")))
        phases["questions_s"] = time.perf_counter() - t0
        ids = {t for _, _, t in asked if t}
        try:
            wait_for(lambda: ids <= set(turn_events(server.log_events())), timeout=10)
        except AssertionError:
            progress("some turn log lines never arrived; reporting those found")
        events = server.log_events()
    finally:
        t0 = time.perf_counter()
        stop(server)
        phases["stop_s"] = time.perf_counter() - t0
        shutil.rmtree(workdir, ignore_errors=True)
    t0 = time.perf_counter()
    result = judge(conversation, window=window, budget=budget, asked=asked, events=events,
                   args=args)
    phases["baselines_s"] = time.perf_counter() - t0
    result.phases = {k: round(v, 3) for k, v in phases.items()}
    result.error_frames = errors
    result.encoder_requests = sum(b.get("response_format") is not None for b in stub.requests)
    return result


def judge(conversation: ld.Conversation, *, window: int, budget: int,
          asked: list[tuple[ld.Question, dict[str, Any] | None, str | None]],
          events: list[dict[str, Any]], args: argparse.Namespace) -> RunResult:
    """Each question's outcome for Chalie and both baselines, and the run's figures."""
    by_id = conversation.by_id
    bm25 = ld.Bm25(conversation.lines)
    newest = {line.dia_id for line in ld.newest(conversation.lines, budget)}
    turns = turn_events(events)
    ready_events = {e["turn_id"]: e for e in events
                    if e.get("event") == "context_ready" and "turn_id" in e and "tokens" in e}
    ready = {turn: e["tokens"] for turn, e in ready_events.items()}
    out = RunResult(conversation.name, window, budget, [], {}, [], [], [], 0, {}, 0)
    for q, body, turn_id in asked:
        texts = [by_id[e].text for e in q.evidence]
        request = ld.request_text(body) if body is not None else ""
        folded = ld.fold(request)
        picked = {line.dia_id for line in bm25.select(q.text, budget)}
        turn_budget = ready.get(turn_id or "", {}).get("memory_budget", budget)
        picked_turn = {line.dia_id for line in bm25.select(q.text, turn_budget)}
        judged = Judged(
            q.conversation or conversation.name, q.number, q.category,
            chalie=body is not None and ld.found_in(texts, folded),
            bm25=set(q.evidence) <= picked, newest=set(q.evidence) <= newest,
            judged=body is not None, turn_id=turn_id, bm25_turn=set(q.evidence) <= picked_turn,
            prompt_tokens=estimate_tokens(request) if body is not None else None,
            where={e: where_found(folded, by_id[e].text) for e in q.evidence})
        out.questions.append(judged)
        if turn_id in ready:
            out.sections.append(ready[turn_id])
            if "ms" in ready_events[turn_id]:
                out.context_s.append(ready_events[turn_id]["ms"] / 1000)
        if turn_id in turns:
            out.overhead.append(turns[turn_id]["response_time_s"] - turns[turn_id]["llm_s"])
        if args.dump is not None:
            report.dump(args.dump, window, conversation, q, judged=judged, request=request,
                        ranked=[line.dia_id for line in bm25.ranked(q.text)], picked=picked)
    bm25.close()
    out.log_problems = _common.log_problems(events)
    return out


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    conversations = [ld.load(args.data / f"{name}.json")
                     for name in [*args.conversations, *args.distractors]]
    runs = conversations
    if args.haystack:
        runs = [ld.haystack(conversations, args.conversations, limit=args.limit)]
    marker = person_marker()
    stub = StubLlm()
    results: list[RunResult] = []
    stored: Path | None = None
    try:
        if args.haystack:
            progress(f"haystack: importing and embedding {len(runs[0].lines)} lines "
                     f"({sum(line.tokens for line in runs[0].lines)} tokens) once")
            args.ambiguous = ld.ambiguous(runs[0])
            if args.ambiguous:
                progress(f"  evidence lines another line begins as (a find of either counts): "
                         f"{', '.join(args.ambiguous)}")
            stored, prepared = prepare(runs[0], args, stub)
            progress(f"  the store is ready; phases {prepared}")
        for window in args.windows:
            for conversation in runs:
                progress(f"window {window}, conversation {conversation.name}: "
                         f"{len(conversation.lines)} lines "
                         f"({sum(line.tokens for line in conversation.lines)} tokens), "
                         f"{len(questions_of(conversation, args))} questions")
                result = run(conversation, window, args, stub, marker, stored=stored)
                if stored is not None and window == args.windows[0]:
                    result.phases = {**prepared, **result.phases}
                progress(f"  {report.one_line(result)}")
                results.append(result)
    finally:
        stub.close()
        shutil.rmtree(MODELS, ignore_errors=True)
        if stored is not None:
            shutil.rmtree(stored.parent, ignore_errors=True)
    wall = time.perf_counter() - started
    figures = report.figures(args, conversations, results, wall)
    sys.stdout.write(report.table(figures))
    if args.json is not None:
        args.json.write_text(json.dumps({**figures, "questions": [
            {"window": r.window, **asdict(q)} for r in results for q in r.questions]},
            indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
