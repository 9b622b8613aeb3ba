"""Supervision: backoff arithmetic, and a real Supervisor restarting a small test child."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pykka
import pytest

from chalie.actors.supervisor import (
    ChildFailed,
    ChildSpec,
    Directory,
    Link,
    RestartPolicy,
    SupervisedActor,
    Supervisor,
)
from chalie.config import SupervisorConfig
from chalie.metrics import Metrics
from tests.actors.conftest import WAIT_S, Recording, WatchedClock, restarts


def policy(max_restarts: int = 10, within_s: float = 30.0) -> RestartPolicy:
    return RestartPolicy(SupervisorConfig(
        backoff_initial_s=1.0, backoff_max_s=5.0, max_restarts=max_restarts, within_s=within_s
    ))


def test_backoff_doubles_per_recent_failure_and_stops_at_the_cap() -> None:
    """A child failing again and again waits 1, 2, 4, then at most 5 seconds before restarts."""
    p = policy()
    assert [p.delay_for("writer", t) for t in (0.0, 1.0, 2.0, 3.0, 4.0)] == [1, 2, 4, 5, 5]


def test_backoff_is_counted_per_child() -> None:
    """Another child's failures do not lengthen a child's first backoff."""
    p = policy()
    p.delay_for("writer", 0.0)
    p.delay_for("writer", 1.0)
    assert p.delay_for("session", 2.0) == 1.0


def test_failures_older_than_the_window_are_forgotten() -> None:
    """A child that failed long ago is restarted after the initial backoff again."""
    p = policy(within_s=30.0)
    assert p.delay_for("writer", 0.0) == 1.0
    assert p.delay_for("writer", 10.0) == 2.0
    assert p.delay_for("writer", 35.0) == 2.0  # the failure at 0 is out of the window
    assert p.delay_for("writer", 100.0) == 1.0


def test_more_restarts_than_allowed_within_the_window_gives_up() -> None:
    """Past max_restarts within within_s, across children, the policy says give up (None)."""
    p = policy(max_restarts=3, within_s=30.0)
    assert [p.delay_for(n, t) for n, t in (("a", 0.0), ("b", 1.0), ("a", 2.0))] == [1, 1, 2]
    assert p.delay_for("b", 3.0) is None
    assert p.delay_for("a", 40.0) == 1.0  # the window has moved past every earlier restart


def test_forgetting_a_child_resets_its_backoff() -> None:
    """After forget(), a child's next failure waits only the initial backoff."""
    p = policy()
    p.delay_for("writer", 0.0)
    p.delay_for("writer", 1.0)
    p.forget("writer")
    assert p.delay_for("writer", 2.0) == 1.0


class Worker(SupervisedActor):
    """Records ("started", urn) and (urn, message); "crash" raises once `gate` is open."""

    def __init__(self, link: Link | None, *, seen: Recording, gate: threading.Event,
                 start_failures: list[int]) -> None:
        super().__init__(link)
        self._seen, self._gate, self._start_failures = seen, gate, start_failures

    def started(self) -> None:
        if self._start_failures:
            self._start_failures.pop()
            raise RuntimeError("could not open its file")
        self._seen.add(("started", self.actor_urn))

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            self._gate.wait(WAIT_S)
            raise RuntimeError("boom")
        self._seen.add((self.actor_urn, message))


class Harness:
    def __init__(self, clock: WatchedClock, *, max_restarts: int, start_failures: int) -> None:
        self.clock = clock
        self.seen = Recording()
        self.gate = threading.Event()
        self.gate.set()
        self.directory = Directory()
        self.metrics = Metrics()
        self.gave_up = Recording()
        self.bystander_seen = Recording()
        failures = [1] * start_failures

        def start_worker(link: Link) -> pykka.ActorRef[Any]:
            return Worker.start(link, seen=self.seen, gate=self.gate, start_failures=failures)

        def start_bystander(link: Link) -> pykka.ActorRef[Any]:
            return Worker.start(link, seen=self.bystander_seen, gate=self.gate, start_failures=[])

        config = SupervisorConfig(
            backoff_initial_s=1.0, backoff_max_s=8.0, max_restarts=max_restarts, within_s=60.0
        )
        self.root = Supervisor.start(
            None, name="root", config=config, clock=clock, directory=self.directory,
            metrics=self.metrics,
            children=(ChildSpec("worker", start_worker), ChildSpec("bystander", start_bystander)),
            on_give_up=self.gave_up.add,
        )

    def instances(self, count: int) -> list[str]:
        """The urns of the first `count` worker instances, once the supervisor has published the
        last one (a call through its mailbox returns after it has handled the restart)."""
        items = self.seen.wait_for(
            lambda xs: sum(x[0] == "started" for x in xs) >= count, f"{count} worker start(s)"
        )
        self.root.proxy().child("worker").get(timeout=WAIT_S)
        return [urn for kind, urn in items if kind == "started"][:count]

    def received(self, urn: str, count: int) -> list[Any]:
        """What instance `urn` has handled, once it has handled `count` messages."""
        items = self.seen.wait_for(
            lambda xs: sum(u == urn for u, _ in xs) >= count, f"{count} message(s) to {urn}"
        )
        return [m for u, m in items if u == urn]

    def restart_after_crash(self, backoff: float) -> None:
        """Crash the current worker and move the clock past its backoff."""
        assert self.directory.tell("worker", "crash")
        self.clock.wait_for_timers(1)
        self.clock.advance(backoff)


@pytest.fixture
def harness(clock: WatchedClock) -> Callable[..., Harness]:
    def build(max_restarts: int = 5, start_failures: int = 0) -> Harness:
        return Harness(clock, max_restarts=max_restarts, start_failures=start_failures)

    return build


@pytest.mark.allow_error_logs
def test_crashed_child_is_restarted_after_backoff_with_its_unhandled_messages(
    harness: Callable[..., Harness],
) -> None:
    """A crashed child comes back once its backoff has passed and handles what was queued."""
    h = harness()
    (first,) = h.instances(1)
    h.gate.clear()
    for message in ("crash", "after-1", "after-2"):
        assert h.directory.tell("worker", message)
    h.gate.set()
    h.clock.wait_for_timers(1)
    h.clock.advance(0.5)
    assert h.clock.pending() == 1  # still waiting out its 1 s backoff
    assert h.directory.get("worker") is None
    h.clock.advance(0.5)
    _, second = h.instances(2)
    assert h.received(second, 2) == ["after-1", "after-2"]
    assert h.received(first, 0) == []
    current = h.directory.get("worker")
    assert current is not None
    assert current.actor_urn == second
    assert restarts(h.metrics, "worker") == 1.0


@pytest.mark.allow_error_logs
def test_second_crash_waits_twice_as_long(harness: Callable[..., Harness]) -> None:
    """The second restart of the same child waits 2 s where the first waited 1 s."""
    h = harness()
    h.instances(1)
    h.restart_after_crash(1.0)
    h.instances(2)
    h.restart_after_crash(1.0)
    assert h.clock.pending() == 1
    h.clock.advance(1.0)
    h.instances(3)
    assert restarts(h.metrics, "worker") == 2.0


@pytest.mark.allow_error_logs
def test_child_that_fails_to_start_is_reported_and_restarted(
    harness: Callable[..., Harness],
) -> None:
    """A child whose start-up raises is restarted like one that crashed later."""
    h = harness(start_failures=1)
    h.clock.wait_for_timers(1)
    h.clock.advance(1.0)
    (urn,) = h.instances(1)
    assert h.directory.tell("worker", "hello")
    items = h.seen.wait_for(lambda xs: (urn, "hello") in xs, "the restarted worker's reply")
    assert items == [("started", urn), (urn, "hello")]
    assert restarts(h.metrics, "worker") == 1.0


@pytest.mark.allow_error_logs
def test_too_many_restarts_give_up_and_stop_the_tree(harness: Callable[..., Harness]) -> None:
    """Past max_restarts the supervisor calls on_give_up and stops itself and its children."""
    h = harness(max_restarts=2)
    h.instances(1)
    h.restart_after_crash(1.0)
    h.instances(2)
    h.restart_after_crash(2.0)
    *_, last = h.instances(3)
    current, bystander = h.directory.get("worker"), h.directory.get("bystander")
    assert current is not None
    assert current.actor_urn == last
    assert bystander is not None
    assert bystander.is_alive()
    assert h.directory.tell("worker", "crash")
    reasons = h.gave_up.wait_for(bool, "on_give_up")
    assert reasons == ["worker failed too often: RuntimeError('boom')"]
    assert bystander.actor_stopped.is_set()  # stopped before on_give_up was called
    assert h.root.actor_stopped.wait(WAIT_S)
    assert current.actor_stopped.is_set()
    assert (h.directory.get("worker"), h.directory.get("bystander")) == (None, None)
    assert h.clock.pending() == 0
    assert restarts(h.metrics, "worker") == 2.0


def test_failure_report_from_a_replaced_instance_is_ignored(
    harness: Callable[..., Harness],
) -> None:
    """A ChildFailed naming an old instance restarts nothing and leaves the child running."""
    h = harness()
    (urn,) = h.instances(1)
    h.root.tell(ChildFailed("worker", "urn:uuid:an-old-instance", "RuntimeError('old')"))
    child = h.root.proxy().child("worker").get(timeout=WAIT_S)  # queued after the report
    assert child.actor_urn == urn
    assert h.clock.pending() == 0
    assert h.directory.tell("worker", "still here")
    assert h.seen.wait_for(lambda xs: len(xs) == 2, "a reply") == [
        ("started", urn), (urn, "still here")
    ]
    assert restarts(h.metrics, "worker") == 0.0


def test_child_stopped_on_purpose_is_not_restarted(harness: Callable[..., Harness]) -> None:
    """Stopping a child deliberately is not a crash: nothing is scheduled and nothing restarts."""
    h = harness()
    h.instances(1)
    ref = h.directory.get("worker")
    assert ref is not None
    ref.stop(block=True, timeout=WAIT_S)
    h.root.proxy().child("worker").get(timeout=WAIT_S)
    assert h.clock.pending() == 0
    assert restarts(h.metrics, "worker") == 0.0


@pytest.mark.allow_error_logs
def test_supervisor_that_gives_up_is_restarted_by_its_parent(clock: WatchedClock) -> None:
    """A child supervisor past its intensity escalates; its parent restarts it and its children."""
    seen, gate, directory, metrics = Recording(), threading.Event(), Directory(), Metrics()
    gate.set()
    common: dict[str, Any] = {"clock": clock, "directory": directory, "metrics": metrics}

    def start_worker(link: Link) -> pykka.ActorRef[Any]:
        return Worker.start(link, seen=seen, gate=gate, start_failures=[])

    def start_inner(link: Link) -> pykka.ActorRef[Any]:
        return Supervisor.start(
            link, name="inner", children=(ChildSpec("worker", start_worker),),
            config=SupervisorConfig(backoff_initial_s=1.0, backoff_max_s=8.0, max_restarts=1,
                                    within_s=60.0), **common,
        )

    root = Supervisor.start(
        None, name="root", children=(ChildSpec("inner", start_inner),),
        config=SupervisorConfig(backoff_initial_s=3.0, backoff_max_s=8.0, max_restarts=5,
                                within_s=60.0), **common,
    )

    def workers(count: int) -> None:
        seen.wait_for(lambda xs: sum(x[0] == "started" for x in xs) >= count, "worker starts")
        inner = root.proxy().child("inner").get(timeout=WAIT_S)
        inner.proxy().child("worker").get(timeout=WAIT_S)

    workers(1)
    first_inner = directory.get("inner")
    for backoff in (1.0, 3.0):  # the worker's own restart, then the inner supervisor's
        assert directory.tell("worker", "crash")
        clock.wait_for_timers(1)
        clock.advance(backoff)
        workers(2 if backoff == 1.0 else 3)
    assert first_inner is not None
    assert first_inner.actor_stopped.wait(WAIT_S)
    new_inner = directory.get("inner")
    assert new_inner is not None
    assert new_inner.is_alive()
    assert (restarts(metrics, "worker"), restarts(metrics, "inner")) == (1.0, 1.0)


class Greeter(SupervisedActor):
    """Says hello to the "peer" as it starts, and records what it is told."""

    def __init__(self, link: Link | None, *, directory: Directory, seen: Recording) -> None:
        super().__init__(link)
        self._directory, self._seen = directory, seen

    def started(self) -> None:
        assert self._directory.tell("peer", "hello")

    def on_receive(self, message: Any) -> Any:
        self._seen.add(message)


class Peer(SupervisedActor):
    """Answers a hello through the Directory, as the StoreWriter answers the Encoder."""

    def __init__(self, link: Link | None, *, directory: Directory) -> None:
        super().__init__(link)
        self._directory = directory

    def on_receive(self, message: Any) -> Any:
        if message == "hello":
            assert self._directory.tell("greeter", "welcome")


def test_an_answer_to_what_a_child_says_as_it_starts_reaches_it(clock: WatchedClock) -> None:
    """A child's set-up runs once its supervisor has published it, so an answer sent through
    the Directory at once finds it (an Encoder starting used to miss the writer's reply)."""
    directory, seen = Directory(), Recording()

    def start_peer(link: Link) -> pykka.ActorRef[Any]:
        return Peer.start(link, directory=directory)

    def start_greeter(link: Link) -> pykka.ActorRef[Any]:
        return Greeter.start(link, directory=directory, seen=seen)

    Supervisor.start(
        None, name="root", clock=clock, directory=directory, metrics=Metrics(),
        config=SupervisorConfig(backoff_initial_s=1.0, backoff_max_s=8.0, max_restarts=5,
                                within_s=60.0),
        children=(ChildSpec("peer", start_peer), ChildSpec("greeter", start_greeter)),
    )
    assert seen.wait_for(bool, "the peer's answer") == ["welcome"]
