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
from chalie.config import Config
from chalie.config_load import load_config

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
    """A TOML file with `sections` (str, int, float, bool, lists of str, and dicts as inline
    tables: {"llm": {"light": {"model": "small"}}} is [llm.light]'s model)."""
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_toml(value)}" for key, value in values.items())
    path = directory / "chalie-test.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(str(v)) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return repr(value)


@pytest.fixture
def make_config(tmp_path: Path) -> Any:
    """Build a Config whose store lives in tmp_path, with section overrides. Its embedder is
    "hashed" (fast and deterministic) unless a test names another."""

    def build(**sections: dict[str, Any]) -> Config:
        merged: dict[str, dict[str, Any]] = {"store": {"path": str(tmp_path / "data")},
                                             "memory": {"embedder": "hashed"}}
        for name, values in sections.items():
            merged.setdefault(name, {}).update(values)
        return load_config(write_config(tmp_path, merged))

    return build
