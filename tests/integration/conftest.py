from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import ServerProcess, StubLlm
from tests.integration.stub_interface import StubInterface


@pytest.fixture
def llm() -> Iterator[StubLlm]:
    stub = StubLlm()
    yield stub
    stub.close()


@pytest.fixture
def server(tmp_path: Path, llm: StubLlm) -> Iterator[ServerProcess]:
    """The real server as a subprocess on an ephemeral port, talking to the stub LLM."""
    proc = ServerProcess(tmp_path, llm).start()
    yield proc
    proc.kill()
    errors = proc.errors()
    assert not errors, f"server logged errors: {errors}"


@pytest.fixture
def iface() -> Iterator[StubInterface]:
    """A stub interface on loopback (not paired yet)."""
    stub = StubInterface()
    yield stub
    stub.stop()


@pytest.fixture
def cookie(server: ServerProcess) -> str:
    """The person's login cookie for `server`."""
    return server.login()
