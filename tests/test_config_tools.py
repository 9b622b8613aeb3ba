"""Configuration of tool danger (tools.confirm, tools.block) and the newer range checks."""

from __future__ import annotations

from pathlib import Path

from chalie.config import ToolsConfig
from chalie.config_load import load_config
from tests.conftest import write_config
from tests.test_config import _config_error as refused


def test_shipped_defaults_confirm_and_block_nothing() -> None:
    """Out of the box no tool is raised to confirm and none is blocked."""
    assert load_config().tools == ToolsConfig(confirm=(), block=())


def test_environment_lists_are_comma_separated_names() -> None:
    """CHALIE_TOOLS__CONFIRM="memory, forget" names both tools, spaces trimmed, in order."""
    config = load_config(env={"CHALIE_TOOLS__CONFIRM": "memory, forget",
                              "CHALIE_TOOLS__BLOCK": "shell"})
    assert config.tools == ToolsConfig(confirm=("memory", "forget"), block=("shell",))


def test_an_empty_environment_list_names_no_tools(tmp_path: Path) -> None:
    """An empty CHALIE_TOOLS__BLOCK clears the list, even over a user file."""
    path = write_config(tmp_path, {"tools": {"block": ["memory"]}})
    assert load_config(path).tools.block == ("memory",)
    assert load_config(path, env={"CHALIE_TOOLS__BLOCK": ""}).tools.block == ()


def test_compaction_threshold_above_one_is_refused(tmp_path: Path) -> None:
    """Compacting only beyond the whole context window makes no sense and stops start-up."""
    error = refused(tmp_path, {"act": {"compaction_threshold": 1.5}})
    assert error.key == "act.compaction_threshold"
    assert "must be at most 1, got 1.5" in str(error)
    assert load_config(env={"CHALIE_ACT__COMPACTION_THRESHOLD": "1"}).act.compaction_threshold == 1


def test_keeping_fewer_than_200_events_is_refused(tmp_path: Path) -> None:
    """store.events_kept below 200 stops start-up naming the key; 200 itself is accepted."""
    error = refused(tmp_path, {"store": {"events_kept": 199}})
    assert error.key == "store.events_kept"
    assert "must be at least 200, got 199" in str(error)
    assert load_config(env={"CHALIE_STORE__EVENTS_KEPT": "200"}).store.events_kept == 200
