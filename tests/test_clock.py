"""The real clock: due callbacks run in order on one shared thread; cancelled ones do not."""

from __future__ import annotations

import logging
import threading

import pytest

from chalie.clock import ManualClock, SystemClock

WAIT_S = 10.0


def test_system_timers_fire_in_due_order_on_one_thread() -> None:
    """Timers set out of order fire by due time, all on the same thread, and cancel works."""
    clock = SystemClock()
    fired: list[tuple[str, str]] = []
    done = threading.Event()

    def note(name: str) -> None:
        fired.append((name, threading.current_thread().name))
        if name == "last":
            done.set()

    clock.call_later(0.03, lambda: note("last"))
    clock.call_later(0.01, lambda: note("second"))
    clock.call_later(0.0, lambda: note("first"))
    clock.call_later(0.02, lambda: note("cancelled")).cancel()
    assert done.wait(WAIT_S)
    assert fired == [("first", "chalie-timers"), ("second", "chalie-timers"),
                     ("last", "chalie-timers")]


@pytest.mark.allow_error_logs
def test_a_failing_timer_callback_does_not_stop_the_others(
    log_records: list[logging.LogRecord],
) -> None:
    """One callback raising is logged; the timers after it still fire."""
    clock = SystemClock()
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    clock.call_later(0.0, boom)
    clock.call_later(0.01, done.set)
    assert done.wait(WAIT_S)
    assert [r.getMessage() for r in log_records if r.levelno == logging.ERROR] == [
        "timer_callback_failed"
    ]


def test_manual_clock_runs_due_callbacks_only_when_advanced() -> None:
    """Nothing fires until the test moves time past the due moment."""
    clock = ManualClock()
    fired: list[int] = []
    clock.call_later(5, lambda: fired.append(5))
    clock.call_later(1, lambda: fired.append(1))
    clock.advance(0.5)
    assert fired == []
    clock.advance(10)
    assert fired == [1, 5]
    assert clock.monotonic() == 1_010.5


def test_manual_clock_tells_when_its_next_timer_is_due() -> None:
    """A driver stepping time from timer to timer sees the earliest live one; a cancelled
    timer does not count."""
    clock = ManualClock()
    assert clock.next_due() is None
    early = clock.call_later(1, lambda: None)
    clock.call_later(5, lambda: None)
    assert clock.next_due() == 1_001.0
    early.cancel()
    assert clock.next_due() == 1_005.0


def test_cancelled_system_timers_do_not_pile_up_until_they_are_due() -> None:
    """Timers cancelled long before they are due (a turn's deadline, an idle timer) are dropped
    from the heap in bulk, so a busy server does not hold an hour of them and their callbacks;
    the ones still live fire as before."""
    clock = SystemClock()
    fired = threading.Event()
    for _ in range(5):
        clock.call_later(3600.0, lambda: None)  # live, far off
    for _ in range(10_000):
        clock.call_later(3600.0, lambda: None).cancel()
    assert clock.pending() < 200
    clock.call_later(0.0, fired.set)
    assert fired.wait(5)
    assert 5 <= clock.pending() < 200
