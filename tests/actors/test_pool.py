"""The worker pool: results and errors come back through futures; shutdown is prompt."""

from __future__ import annotations

import threading

import pytest

from chalie.actors.pool import WorkerPool

WAIT_S = 10.0


def test_jobs_run_on_daemon_threads_and_return_results_or_errors() -> None:
    """A job's value or exception reaches its future; the pool's threads never block exit."""
    pool = WorkerPool(2, name="test-pool")
    try:
        assert pool.submit(lambda a, b: a + b, 2, b=3).result(WAIT_S) == 5
        failing = pool.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failing.result(WAIT_S)
        names = {pool.submit(threading.current_thread).result(WAIT_S)
                 for _ in range(20)}
        assert all(t.daemon and t.name.startswith("test-pool-") for t in names)
    finally:
        pool.shutdown()


def test_shutdown_cancels_queued_jobs_and_refuses_new_ones() -> None:
    """Jobs still queued at shutdown(cancel_futures=True) are cancelled; later submits fail."""
    pool = WorkerPool(1)
    started, release = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return release.wait(WAIT_S)

    running = pool.submit(hold)
    assert started.wait(WAIT_S)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)
    release.set()
    assert running.result(WAIT_S) is True
