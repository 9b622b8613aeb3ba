"""The knowledge-updates benchmark (scripts/bench/updates.py) runs on its cases: at least 150,
every subject with updates and non-updates, and with the `hashed` embedder (lexical: it finds
fewer) a model following the listing catches every update it was shown and replaces nothing
else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "scripts" / "bench"
sys.path.insert(0, str(BENCH))

import updates_cases  # noqa: E402


def test_the_cases_cover_updates_and_non_updates_of_every_subject() -> None:
    cases = updates_cases.cases()
    assert len(cases) >= 150
    for subject in updates_cases.subjects():
        assert {c.update for c in subject.cases} == {True, False}, subject.name
    assert len({(c.subject, c.key, c.value) for c in cases}) == len(cases)
    assert any(c.passing for c in cases)
    assert any(not c.later for c in cases)


def test_a_model_following_the_listing_replaces_what_it_was_shown_and_nothing_else() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "updates.py"), "--embedder", "hashed"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for path in ("tool", "encoder"):
        got = figures[path]
        assert got["wrongly_replaced"] == 0, got
        shown = round(got["old_shown_updates_pct"] * got["updates"] / 100)
        assert got["caught"] == shown, got
        assert 0 < got["candidates_mean"] <= (5 if path == "tool" else 12)
    assert figures["tool"]["cases"] + sum(c.passing for c in updates_cases.cases()) \
        == figures["encoder"]["cases"]
