"""The wait of a background job that keeps failing: doubling per failure in a row, capped,
per job and channel, ended by a success; logged once each way; listed for /health."""

from __future__ import annotations

import logging

from chalie.background.backoff import Backoff, delay_after
from chalie.clock import ManualClock
from chalie.metrics import Metrics

ERROR = "the light model cannot write the episode JSON: the reply holds no JSON object"


def events(records: list[logging.LogRecord], name: str) -> list[tuple[int, dict[str, object]]]:
    return [(r.levelno, r.msg) for r in records
            if isinstance(r.msg, dict) and r.msg.get("event") == name]


def test_the_wait_doubles_with_each_failure_in_a_row_up_to_the_cap() -> None:
    """60 s, 120 s, 240 s ... and never more than the cap, however many failures."""
    assert [delay_after(n, 60.0, 3600.0) for n in range(1, 9)] == [
        60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0]
    assert delay_after(10_000, 60.0, 3600.0) == 3600.0


def test_a_failing_job_is_refused_until_its_wait_is_over() -> None:
    """Refused (and counted) while waiting, allowed again at retry_at; other channels and
    other jobs are not held back."""
    clock, metrics = ManualClock(), Metrics()
    backoff = Backoff(clock, initial_s=60.0, max_s=3600.0, metrics=metrics)
    assert backoff.allows("encoder", "main")
    failing = backoff.failed("encoder", "main", ERROR)
    assert failing.retry_at == clock.time() + 60.0
    assert not backoff.allows("encoder", "main")
    assert backoff.allows("encoder", "work")
    assert backoff.allows("critic", "main")
    clock.advance(59.9)
    assert not backoff.allows("encoder", "main")
    clock.advance(0.1)
    assert backoff.allows("encoder", "main")
    skipped = metrics.registry.get_sample_value("chalie_background_skipped_total",
                                                {"job": "encoder"})
    assert skipped == 2


def test_failures_in_a_row_lengthen_the_wait_and_a_success_ends_it(
    log_records: list[logging.LogRecord],
) -> None:
    """Three failures: waits of 60, 120 and 240 s, one warning; then a success: allowed at
    once, one info line that it recovered, and the next failure waits 60 s again."""
    clock, metrics = ManualClock(), Metrics()
    backoff = Backoff(clock, initial_s=60.0, max_s=3600.0, metrics=metrics)
    started = clock.time()
    waits = []
    for _ in range(3):
        failing = backoff.failed("encoder", "main", ERROR)
        waits.append(failing.retry_at - clock.time())
        clock.advance(failing.retry_at - clock.time())
    assert waits == [60.0, 120.0, 240.0]
    assert backoff.describe() == [{
        "job": "encoder", "channel": "main", "state": "backing_off", "failures": 3,
        "retry_at": started + 420.0, "since": started, "error": ERROR}]
    assert metrics.registry.get_sample_value("chalie_background_backoff",
                                             {"job": "encoder"}) == 1
    backoff.succeeded("encoder", "main")
    backoff.succeeded("encoder", "main")  # nothing was failing: nothing to say
    assert backoff.describe() == []
    assert backoff.allows("encoder", "main")
    assert metrics.registry.get_sample_value("chalie_background_backoff",
                                             {"job": "encoder"}) == 0
    assert backoff.failed("encoder", "main", ERROR).retry_at == clock.time() + 60.0

    warned = events(log_records, "background_backoff")
    assert [(level, m["job"], m["channel"], m["error"]) for level, m in warned] == [
        (logging.WARNING, "encoder", "main", ERROR), (logging.WARNING, "encoder", "main", ERROR)]
    assert [m["failures"] for _, m in events(log_records, "background_recovered")] == [3]
    assert [level for level, _ in events(log_records, "background_backoff_longer")] == [
        logging.DEBUG, logging.DEBUG]


def test_the_health_list_holds_each_failing_job_and_channel_oldest_first() -> None:
    """One entry per (job, channel), in the order they started failing."""
    jobs = [("encoder", "main"), ("critic", "main"), ("encoder", "b")]
    clock = ManualClock()
    backoff = Backoff(clock, initial_s=10.0, max_s=100.0)
    for job, channel in jobs:
        backoff.failed(job, channel, f"{job} failed")
        clock.advance(1.0)
    assert [(f["job"], f["channel"]) for f in backoff.describe()] == jobs
