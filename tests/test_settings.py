"""chalie/settings.py: the saved settings' file and the layers: defaults < config file < saved
settings < environment."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from chalie import settings
from chalie.errors import ConfigError
from tests.conftest import write_config


def test_saved_settings_sit_between_the_config_file_and_the_environment(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = write_config(tmp_path, {"store": {"path": str(data)},
                                   "dmn": {"daily_cap": 2, "quiet_hours": "23:00-07:00"}})
    settings.write(data / settings.FILE_NAME, {"dmn": {"daily_cap": 5, "timezone": "UTC"}})
    config, saved = settings.load(path, {})
    assert (config.dmn.daily_cap, config.dmn.quiet_hours) == (5, "23:00-07:00")
    assert saved == {"dmn": {"daily_cap": 5, "timezone": "UTC"}}
    config, _ = settings.load(path, {"CHALIE_DMN__DAILY_CAP": "9"})
    assert config.dmn.daily_cap == 9


def test_the_file_is_the_owners_alone_and_holds_only_settable_keys(tmp_path: Path) -> None:
    file = tmp_path / settings.FILE_NAME
    settings.write(file, {"llm": {"api_key": "sk-1", "light": {"model": "small"}},
                          "tools": {"confirm": ["forget", "memory"]}})
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert settings.read(file) == {"llm": {"api_key": "sk-1", "light": {"model": "small"}},
                                   "tools": {"confirm": ["forget", "memory"]}}
    file.write_text('[store]\npath = "/elsewhere"\n')
    with pytest.raises(ConfigError, match="cannot be saved in"):
        settings.read(file)
    assert settings.read(tmp_path / "none.toml") == {}


def test_a_removed_value_takes_its_empty_tables_with_it() -> None:
    saved: dict[str, object] = {}
    settings.put(saved, "llm.primary.fallback.model", "b")
    settings.put(saved, "llm.model", "a")
    assert saved == {"llm": {"primary": {"fallback": {"model": "b"}}, "model": "a"}}
    settings.put(saved, "llm.primary.fallback.model", None)
    assert saved == {"llm": {"model": "a"}}


def test_each_key_is_locked_by_its_own_environment_variable() -> None:
    assert settings.env_name("dmn.daily_cap") == "CHALIE_DMN__DAILY_CAP"
    assert settings.env_name("llm.primary.fallback.model") == \
        "CHALIE_LLM__PRIMARY__FALLBACK__MODEL"


def test_settings_that_cannot_be_read_are_a_config_error_naming_the_file(
    tmp_path: Path,
) -> None:
    """A data directory that is a file has no settings (the doctor reports it); one that is
    another user's is a ConfigError naming settings.toml, not a traceback."""
    (tmp_path / "afile").write_text("x")
    assert settings.read(tmp_path / "afile" / settings.FILE_NAME) == {}
    file = tmp_path / "data" / settings.FILE_NAME
    settings.write(file, {"dmn": {"daily_cap": 1}})
    file.chmod(0)
    try:
        if os.geteuid() != 0:  # root reads it anyway
            with pytest.raises(ConfigError, match="cannot be read"):
                settings.read(file)
    finally:
        file.chmod(0o600)
