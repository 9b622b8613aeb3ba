"""Supervision for pykka, which has none: OTP-style one-for-one restarts.

A supervised actor reports its crash to its supervisor from `on_failure` (and from a failed
`on_start`, which pykka does not route to `on_failure`), handing over the messages still in its
inbox. The supervisor restarts it after a backoff that doubles per recent failure, hands the
saved messages to the new instance, and, past `max_restarts` restarts within `within_s`
seconds, gives up: it stops its children and itself and reports to its own supervisor, or, at
the root, calls `on_give_up`. A restart is a new ActorRef; the Directory maps names to the
current one. Only crashes restart a child: one that stops on purpose stays stopped.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import msgspec
import pykka
import structlog

from chalie.clock import Clock
from chalie.config import SupervisorConfig
from chalie.metrics import Metrics

log = structlog.get_logger("chalie.supervisor")

STOP_TIMEOUT_S = 10.0


class ChildFailed(msgspec.Struct, frozen=True, tag=True):
    """A child crashed. `pending` holds the messages left in its inbox, to hand to its successor."""

    name: str
    urn: str
    error: str
    pending: tuple[Any, ...] = ()


class RestartChild(msgspec.Struct, frozen=True, tag=True):
    name: str


class Ping(msgspec.Struct, frozen=True, tag=True):
    """Ask a supervisor to answer once it has started its children."""


@dataclass(frozen=True)
class Link:
    """How a child reaches its supervisor. `published` is set once the supervisor has put the
    child's ref in the Directory (or decided not to): the child's `started()` waits for it, so
    that a reply to what it sends there (a StoreWriter's nudge, through the Directory) finds it."""

    supervisor: pykka.ActorRef[Any]
    name: str
    published: threading.Event = field(default_factory=threading.Event, compare=False,
                                       repr=False)


class Directory:
    """Thread-safe name -> current ActorRef, kept up to date by the supervisors."""

    def __init__(self) -> None:
        self._refs: dict[str, pykka.ActorRef[Any]] = {}
        self._lock = threading.Lock()

    def set(self, name: str, ref: pykka.ActorRef[Any] | None) -> None:
        with self._lock:
            if ref is None:
                self._refs.pop(name, None)
            else:
                self._refs[name] = ref

    def get(self, name: str) -> pykka.ActorRef[Any] | None:
        with self._lock:
            return self._refs.get(name)

    def tell(self, name: str, message: Any) -> bool:
        """Tell the current `name` actor; False (and a warning) when it is not running."""
        ref = self.get(name)
        if ref is not None:
            try:
                ref.tell(message)
            except pykka.ActorDeadError:
                pass
            else:
                return True
        log.warning("actor_unavailable", target=name, message=type(message).__name__)
        return False


class RestartPolicy:
    """Backoff and intensity, as plain arithmetic over failure times."""

    def __init__(self, config: SupervisorConfig) -> None:
        self._config = config
        self._restarts: deque[float] = deque()
        self._failures: dict[str, deque[float]] = {}

    def delay_for(self, name: str, now: float) -> float | None:
        """Seconds to wait before restarting `name`, or None when the supervisor must give up."""
        window = self._config.within_s
        while self._restarts and now - self._restarts[0] > window:
            self._restarts.popleft()
        if len(self._restarts) >= self._config.max_restarts:
            return None
        self._restarts.append(now)
        recent = self._failures.setdefault(name, deque())
        while recent and now - recent[0] > window:
            recent.popleft()
        recent.append(now)
        delay: float = self._config.backoff_initial_s * 2 ** (len(recent) - 1)
        return min(delay, self._config.backoff_max_s)

    def forget(self, name: str) -> None:
        self._failures.pop(name, None)


class SupervisedActor(pykka.ThreadingActor):
    """An actor that tells its supervisor when it dies. Subclasses put set-up in `started()`."""

    # The tree is stopped explicitly at shutdown; an actor that does not stop in time must not
    # keep the process alive (state that matters is in the store, committed atomically).
    use_daemon_thread = True

    def __init__(self, link: Link | None) -> None:
        super().__init__()
        self._link = link

    def started(self) -> None:
        """Set-up after the actor starts; a failure here is reported like a crash."""

    def tell_self(self, message: Any) -> None:
        """Put a message in this actor's mailbox (a pool job's result, a timer's); dropped when
        this instance is stopped or replaced: its successor starts from the store."""
        try:
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass

    def tell_supervisor(self, message: Any) -> None:
        """Tell this actor's supervisor (none in tests: nothing); dropped while shutting down."""
        if self._link is not None:
            try:
                self._link.supervisor.tell(message)
            except pykka.ActorDeadError:
                pass

    def on_start(self) -> None:
        if self._link is not None:
            # Bounded: a supervisor that never publishes (it crashed meanwhile) holds no one.
            self._link.published.wait(STOP_TIMEOUT_S)
        try:
            self.started()
        except Exception as e:
            self._report_failure(e)
            raise

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._report_failure(exception_value)

    def _report_failure(self, error: BaseException | None) -> None:
        if self._link is None:
            return
        pending = []
        inbox: queue.Queue[Any] = self.actor_inbox  # type: ignore[assignment]
        while True:
            try:
                envelope = inbox.get_nowait()
            except queue.Empty:
                break
            if envelope.reply_to is None and not isinstance(
                envelope.message, pykka.messages._ActorStop
            ):
                pending.append(envelope.message)
        failed = ChildFailed(self._link.name, self.actor_urn, repr(error), tuple(pending))
        try:
            self._link.supervisor.tell(failed)
        except pykka.ActorDeadError:
            log.warning("supervisor_gone", child=self._link.name)


@dataclass(frozen=True)
class ChildSpec:
    name: str
    start: Callable[[Link], pykka.ActorRef[Any]]
    register: bool = True  # publish the current ref in the Directory under `name`


class Supervisor(SupervisedActor):
    def __init__(
        self,
        link: Link | None,
        *,
        name: str,
        config: SupervisorConfig,
        clock: Clock,
        directory: Directory,
        metrics: Metrics,
        children: tuple[ChildSpec, ...] = (),
        on_give_up: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(link)
        self.name = name
        self._clock = clock
        self._directory = directory
        self._metrics = metrics
        self._policy = RestartPolicy(config)
        self._specs: dict[str, ChildSpec] = {c.name: c for c in children}
        self._refs: dict[str, pykka.ActorRef[Any]] = {}
        self._pending: dict[str, list[Any]] = {}  # messages for children being restarted
        self._on_give_up = on_give_up
        self._given_up = False

    # -- life cycle --

    def started(self) -> None:
        for spec in list(self._specs.values()):
            self._start_child(spec)

    def on_stop(self) -> None:
        self._stop_children()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop_children()
        super().on_failure(exception_type, exception_value, traceback)

    def _stop_children(self) -> None:
        for name in reversed(list(self._refs)):
            ref = self._refs.pop(name)
            spec = self._specs.get(name)
            if spec is not None and spec.register:
                self._directory.set(name, None)
            try:
                ref.stop(block=True, timeout=STOP_TIMEOUT_S)
            except pykka.ActorDeadError:
                pass
            except pykka.Timeout:
                log.error("child_stop_timeout", supervisor=self.name, child=name)

    # -- messages --

    def on_receive(self, message: Any) -> Any:
        match message:
            case ChildFailed():
                self._child_failed(message)
            case Ping():
                return True
            case RestartChild(name=name):
                spec = self._specs.get(name)
                if spec is not None and name not in self._refs and not self._given_up:
                    self._metrics.actor_restarts.labels(actor=name.split(":", 1)[0]).inc()
                    self._start_child(spec)
            case _:
                return self.handle(message)
        return None

    def handle(self, message: Any) -> Any:
        """Messages other than supervision ones; subclasses route them."""
        log.warning("unexpected_message", supervisor=self.name, message=type(message).__name__)
        return None

    # -- children --

    def add_child(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        self._specs[spec.name] = spec
        return self._start_child(spec)

    def child(self, name: str) -> pykka.ActorRef[Any] | None:
        return self._refs.get(name)

    def forget_child(self, name: str) -> None:
        """A transient child is done for good: it is no longer supervised or restarted."""
        spec = self._specs.pop(name, None)
        self._refs.pop(name, None)
        self._pending.pop(name, None)
        self._policy.forget(name)
        if spec is not None and spec.register:
            self._directory.set(name, None)

    def is_restarting(self, name: str) -> bool:
        return name in self._specs and name not in self._refs

    def hold(self, name: str, message: Any) -> None:
        """Keep `message` for child `name` until it has been restarted."""
        self._pending.setdefault(name, []).append(message)

    def _start_child(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        link = Link(self.actor_ref, spec.name)
        ref = spec.start(link)
        self._refs[spec.name] = ref
        if spec.register:
            self._directory.set(spec.name, ref)
        link.published.set()  # its started() runs now, with replies able to find it
        for message in self._pending.pop(spec.name, []):
            ref.tell(message)
        log.info("child_started", supervisor=self.name, child=spec.name)
        return ref

    def _child_failed(self, failed: ChildFailed) -> None:
        if not self._take_failed(failed):
            return
        delay = self._policy.delay_for(failed.name, self._clock.monotonic())
        if delay is None:
            self._give_up(f"{failed.name} failed too often: {failed.error}")
            return
        self.restart_later(failed.name, delay)

    def _take_failed(self, failed: ChildFailed) -> bool:
        """Take a crashed child out (keeping its inbox for its successor); False for a stale
        report from an instance already replaced or stopped."""
        ref = self._refs.get(failed.name)
        if ref is None or ref.actor_urn != failed.urn:
            return False
        del self._refs[failed.name]
        spec = self._specs[failed.name]
        if spec.register:
            self._directory.set(failed.name, None)
        self._pending[failed.name] = list(failed.pending) + self._pending.get(failed.name, [])
        log.error("child_failed", supervisor=self.name, child=failed.name, error=failed.error)
        return True

    def restart_later(self, name: str, delay: float) -> None:
        self._clock.call_later(delay, lambda: self.tell_self(RestartChild(name)))

    def send_child(self, name: str, message: Any) -> bool:
        """Tell child `name` (held while it restarts, or when it died just now and its
        ChildFailed is on the way); False when there is no such child."""
        if self.is_restarting(name):
            self.hold(name, message)
            return True
        ref = self._refs.get(name)
        if ref is None:
            return False
        try:
            ref.tell(message)
        except pykka.ActorDeadError:
            self.hold(name, message)
        return True

    def _give_up(self, reason: str) -> None:
        self._given_up = True
        log.error("supervisor_gave_up", supervisor=self.name, reason=reason)
        self._stop_children()
        if self._link is not None:
            try:
                self._link.supervisor.tell(ChildFailed(self._link.name, self.actor_urn, reason))
            except pykka.ActorDeadError:
                pass
        elif self._on_give_up is not None:
            self._on_give_up(reason)
        self.stop()
