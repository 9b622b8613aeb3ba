"""The spending governor as the person sees it on the dashboard and in /metrics: a background
path that used its day's tokens stops until its oldest calls are a day old, a budget of 0 turns
a path off, the person's own turns are never held back, and a restart keeps what was spent."""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest

from chalie.background.governor import GOVERNED, STORE_RETRY_S, WINDOW_S, Governor
from chalie.clock import ManualClock
from chalie.metrics import Metrics

HOUR = 3600.0
BUDGETS = {"dmn": 1000, "scheduled": 2000, "goal": 3000, "encoder": 4000}


def make(clock: ManualClock, metrics: Metrics | None = None, *,
         spent: tuple[tuple[str, float, int], ...] = (), **budgets: int) -> Governor:
    """A Governor with BUDGETS, overridden per path by `budgets`."""
    return Governor({**BUDGETS, **budgets}, clock, metrics or Metrics(), spent)


def sample(metrics: Metrics, name: str, path: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"path": path})


def events(records: list[logging.LogRecord], event: str) -> list[dict[str, Any]]:
    """The structlog event dicts named `event`."""
    return [r.msg for r in records if isinstance(r.msg, dict) and r.msg.get("event") == event]


# --- charging and room -----------------------------------------------------------------------

def test_a_path_has_room_until_its_tokens_reach_the_budget() -> None:
    """Calls add up per path; the path has room while the sum is below its budget and none once
    it reaches it, and other paths are not affected."""
    clock = ManualClock()
    governor = make(clock)
    governor.charge("dmn", 600)
    governor.charge("dmn", 399)
    assert governor.used("dmn") == 999
    assert governor.has_room("dmn") is True
    governor.charge("dmn", 1)
    assert governor.used("dmn") == 1000
    assert governor.has_room("dmn") is False
    assert governor.used("goal") == 0
    assert governor.has_room("goal") is True


def test_empty_charges_and_unknown_paths_are_not_counted() -> None:
    """A call that reports no tokens (or a negative count), and a path the governor does not
    know, change nothing."""
    clock = ManualClock()
    governor = make(clock)
    governor.charge("dmn", 0)
    governor.charge("dmn", -50)
    governor.charge("telepathy", 10_000)
    assert [governor.used(p) for p in GOVERNED] == [0, 0, 0, 0]
    assert governor.used("user") == 0
    assert governor.has_room("telepathy") is True


def test_tokens_leave_the_window_a_day_after_their_call() -> None:
    """The window rolls: a call's tokens stop counting exactly 24 hours after it was made, and
    the path has room again at that moment, not a second before."""
    clock = ManualClock()
    governor = make(clock)
    start = clock.time()
    governor.charge("dmn", 700)
    clock.advance(12 * HOUR)
    governor.charge("dmn", 300)
    assert governor.has_room("dmn") is False
    assert governor.frees_at("dmn") == start + WINDOW_S

    clock.advance(12 * HOUR - 1)
    assert governor.used("dmn") == 1000
    assert governor.has_room("dmn") is False
    clock.advance(1)
    assert governor.used("dmn") == 300
    assert governor.has_room("dmn") is True
    clock.advance(12 * HOUR)
    assert governor.used("dmn") == 0


def test_frees_at_is_when_enough_of_the_oldest_calls_have_left() -> None:
    """When the oldest call alone does not bring the path under budget, it frees when the
    next one leaves too; with room it frees now."""
    clock = ManualClock()
    governor = make(clock)
    assert governor.frees_at("dmn") == clock.time()
    governor.charge("dmn", 100)
    clock.advance(HOUR)
    second = clock.time()
    governor.charge("dmn", 200)
    clock.advance(HOUR)
    governor.charge("dmn", 900)  # 1200 in the window; 1100 after the first leaves
    assert governor.frees_at("dmn") == second + WINDOW_S
    clock.advance(second + WINDOW_S - clock.time())
    assert governor.has_room("dmn") is True
    assert governor.used("dmn") == 900


def test_a_budget_of_zero_turns_the_path_off_for_good() -> None:
    """A path with a budget of 0 never has room, even with nothing spent, and never frees; it
    shows as paused from the start, not as a budget that ran out."""
    clock = ManualClock()
    metrics = Metrics()
    governor = make(clock, metrics, scheduled=0)
    assert sample(metrics, "chalie_budget_paused", "scheduled") == 1.0
    assert governor.has_room("scheduled") is False
    assert governor.frees_at("scheduled") == math.inf
    clock.advance(10 * WINDOW_S)
    assert governor.has_room("scheduled") is False
    assert governor.frees_at("scheduled") == math.inf
    assert governor.report()["scheduled"] == {
        "tokens_24h": 0, "tokens_per_day": 0, "paused": True, "frees_at": math.inf}
    assert sample(metrics, "chalie_budget_paused", "scheduled") == 1.0
    assert sample(metrics, "chalie_budget_pauses_total", "scheduled") == 0.0


def test_the_persons_own_turns_are_counted_but_never_held_back() -> None:
    """The user path has no budget: it always has room however much it used, and the report
    shows its tokens with no budget and no pause."""
    clock = ManualClock()
    governor = make(clock)
    governor.charge("user", 10_000_000)
    assert governor.budget("user") is None
    assert governor.has_room("user") is True
    assert governor.used("user") == 10_000_000
    assert governor.frees_at("user") == clock.time()
    assert governor.report()["user"] == {
        "tokens_24h": 10_000_000, "tokens_per_day": None, "paused": False, "frees_at": None}


def test_budgets_are_read_per_governed_path() -> None:
    """Each governed path keeps its own configured budget."""
    governor = make(ManualClock(), goal=5)
    assert {p: governor.budget(p) for p in GOVERNED} == {
        "dmn": 1000, "scheduled": 2000, "goal": 5, "encoder": 4000}


# --- a restart ------------------------------------------------------------------------------

def test_spending_read_at_start_counts_only_the_last_day() -> None:
    """What was spent in the last 24 hours before a restart still counts (so a restart does not
    reset a budget); older calls, empty ones and unknown paths are ignored."""
    clock = ManualClock()
    now = clock.time()
    metrics = Metrics()
    governor = make(clock, metrics, spent=(
        ("dmn", now - 2 * HOUR, 400),
        ("dmn", now - WINDOW_S, 5000),          # exactly a day old: out of the window
        ("dmn", now - WINDOW_S - HOUR, 5000),
        ("dmn", now - HOUR, 0),
        ("goal", now - 23 * HOUR, 3000),
        ("user", now - HOUR, 77),
        ("somewhere", now - HOUR, 10),
    ))
    assert governor.used("dmn") == 400
    assert governor.has_room("dmn") is True
    assert governor.used("user") == 77
    assert governor.used("goal") == 3000
    assert governor.has_room("goal") is False
    assert governor.frees_at("goal") == now + HOUR
    assert sample(metrics, "chalie_budget_tokens_used", "dmn") == 400.0
    assert sample(metrics, "chalie_budget_tokens_used", "goal") == 3000.0


def test_spending_read_at_start_may_come_in_any_order() -> None:
    """Stored calls given newest first still leave the window oldest first."""
    clock = ManualClock()
    now = clock.time()
    governor = make(clock, spent=(("dmn", now - HOUR, 600), ("dmn", now - 20 * HOUR, 500)))
    assert governor.has_room("dmn") is False
    assert governor.frees_at("dmn") == now - 20 * HOUR + WINDOW_S
    clock.advance(4 * HOUR)
    assert governor.used("dmn") == 600
    assert governor.has_room("dmn") is True


# --- metrics, logs, report -------------------------------------------------------------------

def test_metrics_start_with_each_budget_and_nothing_paused() -> None:
    """A fresh governor publishes every governed path's budget, its tokens used, a pause gauge
    at 0 and a pause count at 0 (so the first pause shows as an increase)."""
    metrics = Metrics()
    make(ManualClock(), metrics)
    for path, budget in BUDGETS.items():
        assert sample(metrics, "chalie_budget_tokens_per_day", path) == float(budget)
        assert sample(metrics, "chalie_budget_tokens_used", path) == 0.0
        assert sample(metrics, "chalie_budget_paused", path) == 0.0
        assert sample(metrics, "chalie_budget_pauses_total", path) == 0.0


def test_charges_update_the_tokens_used_gauge() -> None:
    """chalie_budget_tokens_used follows a governed path's charges."""
    metrics = Metrics()
    governor = make(ManualClock(), metrics)
    governor.charge("encoder", 250)
    governor.charge("encoder", 50)
    assert sample(metrics, "chalie_budget_tokens_used", "encoder") == 300.0


def test_a_run_of_refusals_counts_as_one_pause_and_room_again_clears_it(
    log_records: list[logging.LogRecord],
) -> None:
    """The first refusal sets the paused gauge, counts a pause and logs a warning saying when
    the path frees; more refusals do not count again; room again resets the gauge and logs it;
    a later exhaustion is a second pause."""
    clock = ManualClock()
    metrics = Metrics()
    governor = make(clock, metrics)
    governor.charge("dmn", 1000)
    clock.advance(HOUR)

    assert governor.has_room("dmn") is False
    assert governor.has_room("dmn") is False
    assert governor.has_room("dmn") is False
    assert sample(metrics, "chalie_budget_paused", "dmn") == 1.0
    assert sample(metrics, "chalie_budget_pauses_total", "dmn") == 1.0
    exhausted = events(log_records, "budget_exhausted")
    assert [(e["path"], e["used"], e["budget"], e["frees_in_s"]) for e in exhausted] == [
        ("dmn", 1000, 1000, 23 * HOUR)]
    assert [r.levelno for r in log_records
            if isinstance(r.msg, dict) and r.msg.get("event") == "budget_exhausted"] == [
        logging.WARNING]

    clock.advance(23 * HOUR)
    assert governor.has_room("dmn") is True
    assert sample(metrics, "chalie_budget_paused", "dmn") == 0.0
    assert sample(metrics, "chalie_budget_tokens_used", "dmn") == 0.0
    assert [e["path"] for e in events(log_records, "budget_room_again")] == ["dmn"]

    governor.charge("dmn", 1500)
    assert governor.has_room("dmn") is False
    assert sample(metrics, "chalie_budget_pauses_total", "dmn") == 2.0


def test_report_shows_every_path_and_when_a_paused_one_frees() -> None:
    """The dashboard's report lists each path's last-day tokens and budget, and for a paused
    path the wall-clock time it has room again."""
    clock = ManualClock()
    start = clock.time()
    governor = make(clock)
    governor.charge("goal", 3500)
    governor.charge("dmn", 10)
    governor.charge("user", 42)
    clock.advance(HOUR)
    assert governor.report() == {
        "user": {"tokens_24h": 42, "tokens_per_day": None, "paused": False, "frees_at": None},
        "dmn": {"tokens_24h": 10, "tokens_per_day": 1000, "paused": False, "frees_at": None},
        "scheduled": {"tokens_24h": 0, "tokens_per_day": 2000, "paused": False,
                      "frees_at": None},
        "goal": {"tokens_24h": 3500, "tokens_per_day": 3000, "paused": True,
                 "frees_at": start + WINDOW_S},
        "encoder": {"tokens_24h": 0, "tokens_per_day": 4000, "paused": False, "frees_at": None},
    }


def test_charges_from_many_threads_all_count() -> None:
    """Workers charging at once lose no tokens."""
    governor = make(ManualClock(), encoder=10**9)

    def work() -> None:
        for _ in range(500):
            governor.charge("encoder", 3)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert governor.used("encoder") == 8 * 500 * 3


@pytest.mark.parametrize("path", GOVERNED)
def test_every_governed_path_is_held_to_its_budget(path: str) -> None:
    """Each of dmn, scheduled, goal and encoder stops at its own budget."""
    governor = make(ManualClock())
    governor.charge(path, BUDGETS[path] - 1)
    assert governor.has_room(path) is True
    governor.charge(path, 1)
    assert governor.has_room(path) is False


def test_no_path_has_room_while_the_store_cannot_take_writes(
    log_records: list[logging.LogRecord],
) -> None:
    """Background work that could not be stored spends no tokens: every governed path pauses
    (logged once), tries again STORE_RETRY_S later, and has room once the store takes writes;
    the person's path is never held back here (the Session keeps their messages)."""
    clock = ManualClock()
    writable = [True]
    governor = Governor(BUDGETS, clock, Metrics(), store_writable=lambda: writable[0])
    assert governor.has_room("dmn")
    writable[0] = False
    assert not governor.has_room("dmn")
    assert not governor.has_room("dmn")
    assert governor.has_room("user")
    assert governor.frees_at("dmn") == clock.time() + STORE_RETRY_S
    writable[0] = True
    assert governor.has_room("dmn")
    said = [r.msg["event"] for r in log_records  # type: ignore[index]
            if isinstance(r.msg, dict) and r.msg.get("path") == "dmn"]
    assert said == ["background_paused", "background_resumed"]
