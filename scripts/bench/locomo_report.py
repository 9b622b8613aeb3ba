"""The LoCoMo recall benchmark's figures, its table, and the per-question dump for diagnosis
(scripts/bench/locomo.py runs the benchmark)."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import _common
import locomo_data as ld
from _common import summary

if TYPE_CHECKING:
    from locomo import Judged, RunResult

SYSTEMS = ("chalie", "bm25", "newest", "bm25_turn")
TITLES = {"chalie": "Chalie", "bm25": "BM25", "newest": "newest", "bm25_turn": "BM25 (turn)"}
ROWS = (*ld.CATEGORIES.values(), "overall")


def counts(questions: Iterable[Judged]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per system, per category (and overall): found, n and the share found."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    qs = list(questions)
    for system in SYSTEMS:
        rows: dict[str, dict[str, Any]] = {}
        for category, name in [*ld.CATEGORIES.items(), (0, "overall")]:
            picked = [q for q in qs if category in (0, q.category)]
            found = sum(bool(getattr(q, system)) for q in picked)
            rows[name] = {"found": found, "n": len(picked),
                          "share": round(found / len(picked), 4) if picked else None}
        out[system] = rows
    return out


def _sum_phases(results: list[RunResult]) -> dict[str, float]:
    total: Counter[str] = Counter()
    for r in results:
        total.update(r.phases)
    return {k: round(v, 2) for k, v in total.items()}


def _window_figures(results: list[RunResult]) -> dict[str, Any]:
    questions = [q for r in results for q in r.questions]
    sections = [s for r in results for s in r.sections]
    where: Counter[str] = Counter(w for q in questions for w in q.where.values())
    problems: Counter[str] = Counter()
    for r in results:
        problems.update(r.log_problems.get("counts", {}))
    return {
        "memory_budget": results[0].memory_budget,
        "recall": counts(questions),
        "per_conversation": {name: {s: c["overall"] for s, c in counts(
            q for q in questions if q.conversation == name).items()}
            for name in dict.fromkeys(q.conversation for q in questions)},
        "not_judged": sum(not q.judged for q in questions),
        "prompt_tokens": summary((q.prompt_tokens for q in questions
                                  if q.prompt_tokens is not None), digits=1),
        "section_tokens": {name: summary((s[name] for s in sections if name in s), digits=1)
                           for name in sorted({k for s in sections for k in s})},
        "turn_overhead_s": summary(o for r in results for o in r.overhead),
        "context_s": summary(c for r in results for c in r.context_s),
        "evidence_where": dict(where),
        "phases_s": _sum_phases(results),
        "error_frames": sum(r.error_frames for r in results),
        "encoder_requests": sum(r.encoder_requests for r in results),
        "server_log_problems": dict(problems),
    }


def figures(args: argparse.Namespace, conversations: list[ld.Conversation],
            results: list[RunResult], wall: float) -> dict[str, Any]:
    windows = {str(w): _window_figures([r for r in results if r.window == w])
               for w in args.windows if any(r.window == w for r in results)}
    distractors = set(args.distractors)
    return {
        "bench": "locomo",
        "params": {"data": str(args.data), "windows": args.windows, "set": args.overrides,
                   "limit": args.limit, "channel": "main", "llm": "stub on loopback",
                   "haystack": args.haystack, "distractors": args.distractors,
                   "ambiguous_evidence": getattr(args, "ambiguous", [])},
        "conversations": {c.name: {"lines": len(c.lines),
                                   "tokens": sum(line.tokens for line in c.lines),
                                   "questions": 0 if c.name in distractors
                                   else len(c.questions[:args.limit or None]),
                                   "without_evidence": 0 if c.name in distractors
                                   else c.without_evidence,
                                   "distractor": c.name in distractors}
                          for c in conversations},
        "windows": windows,
        "runs": [{"conversation": r.conversation, "window": r.window, "phases_s": r.phases}
                 for r in results],
        "wall_s": round(wall, 1),
        "machine": _common.machine(),
        "revision": _common.revision(),
    }


def _cell(row: dict[str, Any]) -> str:
    if not row["n"]:
        return "-"
    return f"{row['found']:>3}/{row['n']:<3} {100 * row['share']:5.1f}%"


def _ms(figures: dict[str, Any], key: str) -> str:
    return f"{1000 * figures[key]:.1f} ms" if key in figures else "-"


def table(f: dict[str, Any]) -> str:
    """The readable summary: per category and overall, each window's three systems."""
    windows = f["windows"]
    conversations = f["conversations"]
    asked = sum(c["questions"] for c in conversations.values())
    skipped = sum(c["without_evidence"] for c in conversations.values())
    asked_names = [n for n, c in conversations.items() if not c.get("distractor")]
    out = [f"LoCoMo recall: conversations {', '.join(asked_names)}; {asked} questions "
           f"(categories 1-4; {skipped} more have no valid evidence and are skipped)"]
    if f["params"].get("haystack"):
        distractors = [n for n, c in conversations.items() if c.get("distractor")]
        lines = sum(c["lines"] for c in conversations.values())
        tokens = sum(c.get("tokens", 0) for c in conversations.values())
        out.append(f"haystack: {len(conversations)} conversations in one store on one channel, "
                   f"{lines} lines ({tokens} tokens); distractors (lines only): "
                   f"{', '.join(distractors) or 'none'}; evidence lines another line begins "
                   f"as: {len(f['params'].get('ambiguous_evidence', []))}")
    out.append("")
    width = 15
    for w, fig in windows.items():
        out.append(f"llm.context_window {w}: memory budget {fig['memory_budget']} tokens "
                   "(the baselines' budget); BM25 (turn): BM25 with the budget Chalie's memory "
                   "section had in that turn (its share and what the history left)")
        out.append(f"{'category':<12}" + "".join(f"{TITLES[s]:>{width + 2}}" for s in SYSTEMS))
        for row in ROWS:
            out.append(f"{row:<12}" + "".join(f"{_cell(fig['recall'][s][row]):>{width + 2}}"
                                              for s in SYSTEMS))
        p, t, o = fig["prompt_tokens"], fig["section_tokens"], fig["turn_overhead_s"]
        out.append(f"  judged request tokens: p50 {p.get('p50')}, p90 {p.get('p90')} "
                   f"({fig['not_judged']} turns without a judged request)")
        out.append("  context sections used (p50): " + ", ".join(
            f"{k} {v.get('p50')}" for k, v in t.items()))
        out.append(f"  turn overhead (response_time_s - llm_s): p50 {_ms(o, 'p50')}, "
                   f"p90 {_ms(o, 'p90')} ({o['n']} turns); of it gathering the context "
                   f"(context_ready's ms): p50 {_ms(fig['context_s'], 'p50')}")
        out.append(f"  evidence lines in the judged request: {fig['evidence_where']}")
        out.append("  per conversation (" + " / ".join(TITLES[s] for s in SYSTEMS) + "): "
                   + "; ".join(
            f"{c} " + " / ".join(f"{100 * (r[s]['share'] or 0):.0f}%" for s in SYSTEMS)
            for c, r in fig["per_conversation"].items()))
        out.append(f"  phases (s, summed): {fig['phases_s']}; error frames "
                   f"{fig['error_frames']}; encoder requests {fig['encoder_requests']}; "
                   f"server warnings {fig['server_log_problems'] or 'none'}")
        out.append("")
    out.append(f"wall time {f['wall_s']} s on {f['machine']['cores']} cores, "
               f"revision {f['revision']}")
    return "\n".join(out) + "\n"


def one_line(r: RunResult) -> str:
    c = counts(r.questions)
    shares = ", ".join(f"{TITLES[s]} {c[s]['overall']['found']}/{c[s]['overall']['n']}"
                       for s in SYSTEMS)
    return f"{shares}; phases {r.phases}"


def dump(root: Path, window: int, conversation: ld.Conversation, q: ld.Question, *,
         judged: Judged, request: str, ranked: list[str], picked: set[str]) -> None:
    """One question's judged request and verdicts, as text."""
    folder = root / f"w{window}" / (q.conversation or conversation.name)
    folder.mkdir(parents=True, exist_ok=True)
    verdict = "found" if judged.chalie else "missed"
    lines = [
        f"conversation {conversation.name}, question {q.number}, category {q.category} "
        f"({ld.CATEGORIES[q.category]}), window {window}",
        f"question: {q.text}",
        f"answer: {q.answer}",
        f"Chalie: {verdict}; BM25: {judged.bm25}; newest: {judged.newest}; "
        f"turn {judged.turn_id}; request tokens {judged.prompt_tokens}",
        "evidence (where in the judged request; rank in BM25, * = within the budget):",
    ]
    for e in q.evidence:
        rank = ranked.index(e) + 1 if e in ranked else None
        lines.append(f"  {e} [{judged.where.get(e)}] bm25 {rank}{'*' if e in picked else ''}: "
                     f"{conversation.by_id[e].text}")
    if q.invalid:
        lines.append(f"  (skipped ids naming no line: {', '.join(q.invalid)})")
    lines += ["", "----- judged request -----", request or "(none identified)"]
    (folder / f"q{q.number:03d}-{verdict}.txt").write_text("\n".join(lines) + "\n",
                                                          encoding="utf-8")
