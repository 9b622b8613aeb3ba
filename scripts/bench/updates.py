"""Knowledge that updates: when a fact is stored, is the current fact it makes untrue among the
candidates shown, and with a model that follows the listing, is it replaced, and nothing else?

The cases are scripts/bench/updates_cases.py: 45 subjects of a person's life (home, employer,
partner, car, diet...), each with the fact stored about it once and what the person says later,
updates (often under another key, in other words, some said only in passing) and non-updates
(a visit, a wish, someone else's, one more of something). Each case starts from the same store:
the person's 45 current facts (one a subject), with their vectors from the embedder measured
(the shipped one, `minilm`, unless --embedder says otherwise), stored a year ago. Then:

- through the `memory` tool (not for lines said only in passing: a turn would not call it for
  them): the real MemoryTool remembers the case's fact on the real store and recall; its result
  lists the candidates by id. A scripted model follows the listing: when the case is an update
  and the old fact is listed, it calls the tool again with `replaces` naming it; otherwise it
  replaces nothing. The effects are applied as the StoreWriter applies them.
- through the encoder: the person's line sits among other talk in a window of eight lines;
  the encoder's candidate search (chalie.memory.updates.for_lines, as the Encoder runs it)
  picks the known facts its prompt shows (the request is rendered, and must show them by id);
  a scripted encoder answers with the case's fact, naming the old fact in `replaces` when the
  case is an update and the prompt showed it; the answer is parsed and stored as the Encoder's.

Figures, per path: how often the old fact is among the candidates shown, for updates (goal:
at least 95%) and for non-updates; how many candidates are shown on average; updates caught
(the old fact superseded by the new one); facts wrongly replaced (any fact superseded that the
case says stays current, by `replaces` or by a key); and what a model replacing every listed
candidate would wrongly replace (why the judgement is the model's, not a threshold's).

    .venv/bin/python scripts/bench/updates.py [--embedder minilm|hashed] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _common
import msgspec
import updates_cases
from _common import emit, progress

from chalie.clock import ManualClock
from chalie.config import MemoryConfig
from chalie.config_load import load_config
from chalie.memory import encoding, updates
from chalie.memory.embedders import Embedder, build_embedder
from chalie.memory.recall import Recall
from chalie.prompts import Prompts
from chalie.store import db, memory_writes, writes
from chalie.store.effects import RememberFact
from chalie.store.memory_queries import WindowLine
from chalie.tools.base import ToolContext
from chalie.tools.memory import MemoryTool
from chalie.values.keys import normalise_key
from chalie.values.memory import Kind, knowledge_text

_common.quiet_logging()

DAY = 86400.0
STORED_AT = 1_735_689_600.0  # 2025-01-01: when the person's facts were stored
LATER_S = 200 * DAY  # a case said in another session, months later
SOON_S = 3 * DAY  # one said the same week
LISTED = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
# Other talk around the person's line in the encoder's window.
CHATTER = (
    ("user", "Can you remind me to call the plumber tomorrow morning?"),
    ("assistant", "Sure, I'll remind you at nine."),
    ("user", "What's a quick dinner I can make with eggs and spinach?"),
    ("assistant", "A spinach frittata takes twenty minutes."),
    ("user", "The weather has been awful all week."),
    ("assistant", "Rain until Thursday, then it clears up."),
    ("user", "I need to renew my passport before the summer."),
    ("assistant", "The passport office takes about three weeks."),
    ("user", "Remind me what time the match starts on Saturday."),
    ("assistant", "Kick-off is at 8 pm."),
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default=load_config(None, env={}).memory.embedder,
                        choices=["minilm", "hashed"])
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="memory.KEY=VALUE", help="another value for a memory setting "
                        "(update_candidates, update_similarity, encoder_known_facts)")
    parser.add_argument("--json", type=Path, help="write the figures and every case here")
    return parser.parse_args()


class Bench:
    def __init__(self, root: Path, embedder: Embedder, memory: MemoryConfig) -> None:
        self.root = root
        self.embedder = embedder
        self.memory = memory
        self.prompts = Prompts.load()
        self.subjects = updates_cases.subjects()
        self.template = root / "template"
        self.old_ids: dict[str, int] = {}
        self.old_keys = {s.name: s.old[0] for s in self.subjects}
        self.space = 0
        self._build_template()

    def _build_template(self) -> None:
        """The person's current facts, one per subject, with their vectors."""
        conn = db.open_writer(self.template, busy_timeout_ms=5000, synchronous="OFF")
        with db.immediate(conn):
            self.space = memory_writes.ensure_space(conn, self.embedder.space, now=STORED_AT)
            for n, subject in enumerate(self.subjects):
                key, value = subject.old
                new = memory_writes.remember(conn, RememberFact(key, value), turn_id=None,
                                             now=STORED_AT + n)
                assert new is not None, subject.name
                self.old_ids[subject.name] = new
            rows = [(self.old_ids[s.name], knowledge_text(*s.old)) for s in self.subjects]
            vectors = self.embedder.embed([t for _, t in rows], timeout_s=120.0)
            memory_writes.store_vectors(conn, self.space, self.embedder.kind, Kind.KNOWLEDGE,
                                        [(i, v) for (i, _), v in zip(rows, vectors, strict=True)],
                                        upto_id=max(self.old_ids.values()), now=STORED_AT)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    def store_for(self, name: str) -> Any:
        path = self.root / name
        shutil.copytree(self.template, path)
        return db.open_writer(path, busy_timeout_ms=5000, synchronous="OFF")

    def current(self, conn: Any) -> set[int]:
        return {int(i) for (i,) in conn.execute(
            "SELECT id FROM knowledge WHERE superseded_at IS NULL")}

    def judge(self, case: updates_cases.Case, conn: Any, listed: Sequence[int], *,
              searched_ms: float) -> dict[str, Any]:
        old = self.old_ids[case.subject]
        gone = set(self.old_ids.values()) - self.current(conn)
        should_go = {old} if case.update else set()
        # Under the same key the old fact is replaced by the key itself, and the tool's result
        # says so: it counts as shown.
        same_key = normalise_key(case.key) == normalise_key(self.old_keys[case.subject])
        return {"subject": case.subject, "key": case.key, "value": case.value,
                "update": case.update, "passing": case.passing, "later": case.later,
                "same_key": same_key, "shown": same_key or old in listed,
                "candidates": len(listed),
                "caught": case.update and old in gone,
                "wrong": len(gone - should_go),
                "naive_wrong": len(set(listed) - should_go),
                "ms": searched_ms}

    def through_tool(self, n: int, case: updates_cases.Case) -> dict[str, Any]:
        conn = self.store_for(f"tool-{n}")
        now = STORED_AT + (LATER_S if case.later else SOON_S)
        clock = ManualClock(wall=now)
        recall = Recall(embedder=self.embedder, space_id=self.space, config=self.memory,
                        clock=clock)
        tool = MemoryTool()

        def ctx(*pending: Any) -> ToolContext:
            return ToolContext(channel="main", turn_id="turn", read=lambda: conn, clock=clock,
                               pending=pending, recall=recall)

        started = time.perf_counter()
        first = tool.run({"action": "remember", "key": case.key, "value": case.value}, ctx())
        searched_ms = (time.perf_counter() - started) * 1000
        assert not first.is_error, first.text
        listing = first.text.split("\n", 1)[1] if "\n" in first.text else ""
        listed = [int(i) for i in LISTED.findall(listing)]
        effects = list(first.effects)
        old = self.old_ids[case.subject]
        if case.update and old in listed:  # the scripted model follows the listing
            second = tool.run({"action": "remember", "key": case.key, "value": case.value,
                               "replaces": [old]}, ctx(*effects))
            assert not second.is_error, second.text
            effects += second.effects
        with db.immediate(conn):
            for effect in effects:
                writes.apply_effect(conn, effect, turn_id="turn", now=now)
        try:
            return self.judge(case, conn, listed, searched_ms=searched_ms)
        finally:
            conn.close()

    def through_encoder(self, n: int, case: updates_cases.Case) -> dict[str, Any]:
        conn = self.store_for(f"encoder-{n}")
        now = STORED_AT + (LATER_S if case.later else SOON_S)
        start = (2 * n) % len(CHATTER)
        talk = [CHATTER[(start + i) % len(CHATTER)] for i in range(6)]
        said_at = 2 if n % 2 else 4  # the person's line among the others (1-based: 3 or 5)
        talk[said_at:said_at] = [("user", case.said), ("assistant", "I see, thanks for telling "
                                                       "me.")]
        lines = [WindowLine(id=i + 1, role=role, text=text, created_at=now + 60 * i,
                            turn_id=f"t{i // 2 + 1}") for i, (role, text) in enumerate(talk)]
        started = time.perf_counter()
        known = updates.for_lines(conn, [(ln.id, ln.text) for ln in lines if ln.role == "user"],
                                  embedder=self.embedder, space_id=self.space,
                                  limit=self.memory.encoder_known_facts,
                                  min_similarity=self.memory.update_similarity,
                                  timeout_s=30.0)
        searched_ms = (time.perf_counter() - started) * 1000
        request = encoding.request(self.prompts, lines, known=known)
        text = request.messages[0].content
        listed = [k.id for k in known]
        assert all(f"[{i}] " in text for i in listed), "the prompt must show every candidate"
        old = self.old_ids[case.subject]
        replaces = [old] if case.update and old in listed else []
        answer = json.dumps({
            "episodes": [{"gist": "They talked.", "intent": "chat", "outcome": "done",
                          "entities": [], "salience": 0.5, "valence": 0.0, "open_loops": [],
                          "first_line": 1, "last_line": len(lines)}],
            "facts": [{"key": case.key, "value": case.value, "kind": "fact",
                       "line": said_at + 1, "replaces": replaces}],
        })
        window = encoding.to_window(encoding.parse(answer), lines, known=set(listed))
        with db.immediate(conn):
            for fact in window.facts:
                memory_writes.remember(conn, fact, turn_id=None, now=now + 3600)
        try:
            return self.judge(case, conn, listed, searched_ms=searched_ms)
        finally:
            conn.close()


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ups = [r for r in rows if r["update"]]
    nons = [r for r in rows if not r["update"]]

    def share(part: list[dict[str, Any]], what: Callable[[dict[str, Any]], bool]) -> float:
        return round(100 * sum(1 for r in part if what(r)) / len(part), 1) if part else 0.0

    return {
        "cases": len(rows), "updates": len(ups), "non_updates": len(nons),
        "old_shown_updates_pct": share(ups, lambda r: r["shown"]),
        "old_shown_non_updates_pct": share(nons, lambda r: r["shown"]),
        "candidates_mean": round(statistics.fmean(r["candidates"] for r in rows), 2),
        "caught": sum(1 for r in ups if r["caught"]),
        "wrongly_replaced": sum(r["wrong"] for r in rows),
        "naive_wrongly_replaced": sum(r["naive_wrong"] for r in rows),
        "search_ms_p50": round(statistics.median(r["ms"] for r in rows), 2),
        "missed": [f"{r['subject']} -> {r['key']}: {r['value']}" for r in ups if not r["shown"]],
    }


def main() -> None:
    args = parse_args()
    config = load_config(None, env={})
    changes: dict[str, Any] = {}
    for override in args.overrides:
        key, _, value = override.partition("=")
        name = key.removeprefix("memory.")
        changes[name] = type(getattr(config.memory, name))(value)
    memory = msgspec.structs.replace(config.memory, embedder=args.embedder,
                                     embed_weights_url="", **changes)
    cases = updates_cases.cases()
    with tempfile.TemporaryDirectory(prefix="chalie-updates-") as tmp:
        root = Path(tmp)
        progress(f"building the {args.embedder} embedder")
        embedder = build_embedder(memory, config.llm, models_dir=root / "models")
        bench = Bench(root, embedder, memory)
        tool_rows, encoder_rows = [], []
        for n, case in enumerate(cases):
            if not case.passing:
                tool_rows.append(bench.through_tool(n, case))
            encoder_rows.append(bench.through_encoder(n, case))
        embedder.close()
    figures = {"tool": summary(tool_rows), "encoder": summary(encoder_rows)}
    params = {"embedder": args.embedder, "cases": len(cases),
              "subjects": len(updates_cases.subjects()),
              "update_candidates": memory.update_candidates,
              "update_similarity": memory.update_similarity,
              "encoder_known_facts": memory.encoder_known_facts}
    for path, got in figures.items():
        progress(f"{path}: old fact shown for {got['old_shown_updates_pct']}% of "
                 f"{got['updates']} updates ({got['old_shown_non_updates_pct']}% of "
                 f"{got['non_updates']} non-updates), {got['candidates_mean']} candidates on "
                 f"average; caught {got['caught']}/{got['updates']}, wrongly replaced "
                 f"{got['wrongly_replaced']} (replacing all listed: "
                 f"{got['naive_wrongly_replaced']}); search p50 {got['search_ms_p50']} ms")
    if args.json:
        args.json.write_text(json.dumps({"params": params, **figures,
                                         "rows": {"tool": tool_rows, "encoder": encoder_rows}},
                                        indent=1))
    emit("updates", params, **figures)


if __name__ == "__main__":
    main()
