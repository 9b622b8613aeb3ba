"""Shared fixtures: config in a temp dir, log capture that fails a test on unexpected ERRORs,
and every actor stopped after every test."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from chalie import logs
from chalie.config import Config, load_config

logs.configure("json", "debug")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def log_records(request: pytest.FixtureRequest) -> Iterator[list[logging.LogRecord]]:
    """Every log record of the test; an ERROR fails it unless marked allow_error_logs."""
    handler = _Capture()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.records
    finally:
        root.removeHandler(handler)
    if request.node.get_closest_marker("allow_error_logs") is None:
        errors = [r for r in handler.records if r.levelno >= logging.ERROR]
        if errors:
            pytest.fail(f"unexpected ERROR log: {errors[0].getMessage()!r} from {errors[0].name}")


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)


def write_config(directory: Path, sections: dict[str, dict[str, Any]]) -> Path:
    """A TOML file with `sections` (str, int, float, bool and lists of str)."""
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            if isinstance(value, bool):
                lines.append(f"{key} = {'true' if value else 'false'}")
            elif isinstance(value, (list, tuple)):
                items = ", ".join('"' + str(v).replace('"', '\\"') + '"' for v in value)
                lines.append(f"{key} = [{items}]")
            elif isinstance(value, str):
                escaped = value.replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'{key} = "{escaped}"')
            else:
                lines.append(f"{key} = {value!r}")
    path = directory / "chalie-test.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def make_config(tmp_path: Path) -> Any:
    """Build a Config whose store lives in tmp_path, with section overrides."""

    def build(**sections: dict[str, Any]) -> Config:
        merged: dict[str, dict[str, Any]] = {"store": {"path": str(tmp_path / "data")}}
        for name, values in sections.items():
            merged.setdefault(name, {}).update(values)
        return load_config(write_config(tmp_path, merged))

    return build
