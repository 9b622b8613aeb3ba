from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import ServerProcess, StubLlm


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
