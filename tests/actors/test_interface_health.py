"""InterfaceHealth: three failed checks in a row take an interface's tools out of prompts; the
first success brings them back; pairing and unpairing are seen by readers when answered."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from chalie.actors.interface_health import (
    HealthDeps,
    InterfaceChanged,
    InterfaceGone,
    InterfaceHealth,
)
from chalie.config import Config
from chalie.interfaces.board import InterfaceBoard
from chalie.interfaces.capabilities import Capability, Health, Parameter, encode_capabilities
from chalie.interfaces.errors import InterfaceError
from chalie.metrics import Metrics
from chalie.store import db
from chalie.store.interface_rows import InterfaceRow
from chalie.tools.catalog import ToolCatalog
from tests.actors.conftest import WAIT_S, InlineExecutor, WatchedClock

FORECAST = Capability(name="forecast", description="The weather forecast.", parameters=(
    Parameter(name="city", type="string", required=True, description="Which city"),))


class FakeClient:
    """Answers /health as told; counts the checks."""

    def __init__(self) -> None:
        self.up = True
        self.checks = 0
        self.lock = threading.Lock()

    def health(self, host: str, port: int) -> Health:
        with self.lock:
            self.checks += 1
        if not self.up:
            raise InterfaceError(f"GET http://{host}:{port}/health: connection refused")
        return Health(status="ok", name="weather", version="1")


def row(interface_id: str = "i-1") -> InterfaceRow:
    return InterfaceRow(id=interface_id, name="weather", host="127.0.0.1", port=9001,
                        signals=None, token_hash=f"hash-{interface_id}", version="1",
                        capabilities=encode_capabilities([FORECAST]), paired_at=1.0,
                        refreshed_at=1.0)


class Running:
    def __init__(self, ref: pykka.ActorRef[Any], deps: HealthDeps, client: FakeClient) -> None:
        self.ref, self.deps, self.client = ref, deps, client

    def offered(self) -> list[str]:
        return [s.name for s in self.deps.catalog.specs()]

    def tick(self) -> None:
        """One health round: the interval passes and the actor has handled its results."""
        clock = self.deps.clock
        assert isinstance(clock, WatchedClock)
        clock.advance(self.deps.config.health_interval_s)
        self.ref.ask(InterfaceChanged(row("sync")), timeout=WAIT_S)  # queued after them
        self.ref.ask(InterfaceGone("sync"), timeout=WAIT_S)


@pytest.fixture
def running(make_config: Any, clock: WatchedClock, tmp_path: Path) -> Iterator[Running]:
    config: Config = make_config()
    db.open_writer(config.store.path, busy_timeout_ms=1000, synchronous="FULL").close()
    readers = db.Readers(db.db_path(config.store.path), busy_timeout_ms=1000)
    client = FakeClient()
    deps = HealthDeps(board=InterfaceBoard(), catalog=ToolCatalog([]), client=client,  # type: ignore[arg-type]
                      config=config.interfaces, read=readers.get, clock=clock,
                      pool=InlineExecutor(), metrics=Metrics())
    ref = InterfaceHealth.start(None, deps=deps)
    yield Running(ref, deps, client)
    ref.stop()


def test_a_paired_interface_is_online_with_its_tools_offered(running: Running) -> None:
    """Once pairing is answered, its tools are in the catalog and it is online on the board."""
    assert running.ref.ask(InterfaceChanged(row()), timeout=WAIT_S) is True
    assert running.offered() == ["forecast"]
    state = running.deps.board.get("i-1")
    assert state is not None
    assert state.online
    assert running.deps.metrics.registry.get_sample_value("chalie_interfaces_online") == 1


def test_three_failures_in_a_row_take_it_offline_and_one_success_brings_it_back(
    running: Running, log_records: list[Any],
) -> None:
    """Two failed checks change nothing; the third hides its tools; the next success restores
    them. Both transitions are counted and logged."""
    running.ref.ask(InterfaceChanged(row()), timeout=WAIT_S)
    running.client.up = False
    running.tick()
    running.tick()
    assert running.offered() == ["forecast"]
    running.tick()
    assert running.offered() == []
    state = running.deps.board.get("i-1")
    assert state is not None
    assert (state.online, state.failures) == (False, 3)
    assert state.last_error == "GET http://127.0.0.1:9001/health: connection refused"
    running.client.up = True
    running.tick()
    assert running.offered() == ["forecast"]
    registry = running.deps.metrics.registry
    assert registry.get_sample_value("chalie_interface_transitions_total", {"to": "offline"}) == 1
    assert registry.get_sample_value("chalie_interface_transitions_total", {"to": "online"}) == 1
    events = [r.getMessage() for r in log_records]
    assert any("interface_offline" in e for e in events)
    assert any("interface_online" in e for e in events)


def test_a_failure_between_successes_does_not_count_towards_three(running: Running) -> None:
    """Failures must come in a row: a success in between starts the count again."""
    running.ref.ask(InterfaceChanged(row()), timeout=WAIT_S)
    for up in (False, False, True, False, False):
        running.client.up = up
        running.tick()
    assert running.offered() == ["forecast"]


def test_unpairing_removes_its_tools_and_its_board_entry_before_answering(
    running: Running,
) -> None:
    """When InterfaceGone is answered, no reader sees the interface or its tools."""
    running.ref.ask(InterfaceChanged(row()), timeout=WAIT_S)
    assert running.ref.ask(InterfaceGone("i-1"), timeout=WAIT_S) is True
    assert running.offered() == []
    assert running.deps.board.get("i-1") is None
    assert running.deps.board.by_token("anything") is None
    assert running.ref.ask(InterfaceGone("i-1"), timeout=WAIT_S) is False
