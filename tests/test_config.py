"""Configuration: shipped defaults, then a user file, then CHALIE_<SECTION>__<KEY> variables."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from chalie import cli
from chalie.config import Config
from chalie.config_load import load_config
from chalie.errors import ConfigError
from chalie.paths import DEFAULT_CONFIG
from tests.conftest import write_config


def _shipped() -> dict[str, dict[str, Any]]:
    with DEFAULT_CONFIG.open("rb") as f:
        return tomllib.load(f)


def _config_error(
    tmp_path: Path,
    sections: dict[str, dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
) -> ConfigError:
    path = write_config(tmp_path, sections) if sections is not None else None
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=env)
    return caught.value


# --- defaults and layering ------------------------------------------------------------------------

def test_shipped_defaults_name_every_setting_and_nothing_else() -> None:
    """config/chalie.toml holds exactly the sections and keys the Config has, no more, no less."""
    shipped = _shipped()
    assert set(shipped) == set(Config.__struct_fields__)
    for section, section_type in get_type_hints(Config).items():
        assert set(shipped[section]) == set(section_type.__struct_fields__), section


def test_defaults_alone_load_the_documented_values() -> None:
    """Without a user file or environment the server uses the values written in chalie.toml."""
    config = load_config()
    assert config.server.host == "127.0.0.1"
    assert config.server.port == 8081
    assert config.store.path == "data"
    assert config.store.synchronous == "FULL"
    assert config.llm.provider == "openai"
    assert config.llm.base_url == "http://127.0.0.1:11434/v1"
    assert config.act.max_iterations == 8
    assert config.supervisor.max_restarts == 5
    assert config.log.level == "info"


def test_user_file_overrides_only_the_keys_it_names(tmp_path: Path) -> None:
    """A user file changing the port and model leaves every other setting at its default."""
    path = write_config(tmp_path, {"server": {"port": 9100}, "llm": {"model": "qwen2.5"}})
    config = load_config(path)
    defaults = load_config()
    assert config.server.port == 9100
    assert config.llm.model == "qwen2.5"
    assert config.server.host == defaults.server.host
    assert config.llm.base_url == defaults.llm.base_url
    assert config.act == defaults.act
    assert config.store == defaults.store


def test_environment_overrides_defaults_and_user_file(tmp_path: Path) -> None:
    """CHALIE_SERVER__PORT=9000 wins over both the shipped default and the user file's port."""
    path = write_config(tmp_path, {"server": {"port": 9100, "host": "0.0.0.0"}})
    config = load_config(path, env={"CHALIE_SERVER__PORT": "9000", "HOME": "/root"})
    assert config.server.port == 9000
    assert config.server.host == "0.0.0.0"
    assert load_config(env={"CHALIE_SERVER__PORT": "9000"}).server.port == 9000


def test_environment_values_are_read_as_the_key_type() -> None:
    """Environment strings become floats and strings where the setting is one."""
    config = load_config(env={
        "CHALIE_LLM__RETRY_BACKOFF_S": "0.25",
        "CHALIE_LLM__MODEL": "mistral",
        "CHALIE_STORE__SYNCHRONOUS": "NORMAL",
    })
    assert config.llm.retry_backoff_s == 0.25
    assert config.llm.model == "mistral"
    assert config.store.synchronous == "NORMAL"


def test_environment_accepts_fractional_session_days() -> None:
    """auth.session_days is a float setting, so CHALIE_AUTH__SESSION_DAYS=0.5 means half a day."""
    assert load_config(env={"CHALIE_AUTH__SESSION_DAYS": "0.5"}).auth.session_days == 0.5


# --- refusals -------------------------------------------------------------------------------------

def test_unknown_section_in_file_is_refused_by_name(tmp_path: Path) -> None:
    """A [plugins] section the server does not know stops start-up naming the section."""
    error = _config_error(tmp_path, {"plugins": {"enabled": True}})
    assert error.key == "plugins"
    assert "plugins" in str(error)
    assert "unknown section" in str(error)


def test_unknown_key_in_file_is_refused_by_dotted_name(tmp_path: Path) -> None:
    """A misspelt server.prot in the user file is reported as server.prot."""
    error = _config_error(tmp_path, {"server": {"prot": 9000}})
    assert error.key == "server.prot"
    assert "server.prot" in str(error)
    assert "unknown key" in str(error)


def test_unknown_key_in_environment_is_refused_by_dotted_name(tmp_path: Path) -> None:
    """CHALIE_SERVER__PROT is reported as the unknown key server.prot."""
    error = _config_error(tmp_path, env={"CHALIE_SERVER__PROT": "9000"})
    assert error.key == "server.prot"
    assert "server.prot" in str(error)
    assert "environment" in str(error)


def test_wrong_type_in_file_is_refused_by_dotted_name(tmp_path: Path) -> None:
    """port = "x" in the user file is reported as a bad server.port."""
    error = _config_error(tmp_path, {"server": {"port": "x"}})
    assert error.key == "server.port"
    assert "config error: server.port:" in str(error)
    assert "int" in error.problem


def test_wrong_type_in_environment_is_refused_by_dotted_name(tmp_path: Path) -> None:
    """CHALIE_SERVER__PORT=abc is reported as a bad server.port, quoting the value."""
    error = _config_error(tmp_path, env={"CHALIE_SERVER__PORT": "abc"})
    assert error.key == "server.port"
    assert "'abc'" in str(error)


def test_value_outside_a_choice_is_refused_by_dotted_name(tmp_path: Path) -> None:
    """store.synchronous = "OFF" is not one of FULL/NORMAL and is reported by its key."""
    error = _config_error(tmp_path, {"store": {"synchronous": "OFF"}})
    assert error.key == "store.synchronous"


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [("act", "max_iterations", 0), ("act", "workers", -2), ("llm", "request_timeout_s", 0.0),
     ("llm", "stall_timeout_s", 0.0), ("server", "max_frame_bytes", 0),
     ("supervisor", "within_s", -1.0), ("memory", "embed_threads", 0)],
)
def test_non_positive_value_for_a_positive_setting_is_refused(
    tmp_path: Path, section: str, key: str, value: float
) -> None:
    """A zero or negative count or duration that must be positive is reported by its key."""
    error = _config_error(tmp_path, {section: {key: value}})
    assert error.key == f"{section}.{key}"
    assert "greater than 0" in error.problem


def test_what_was_said_is_kept_unless_the_person_sets_a_number_of_days(tmp_path: Path) -> None:
    """store.transcript_days is 0 (keep every line) by default; a positive number of days is
    taken, and a negative one is reported by its key."""
    assert load_config().store.transcript_days == 0
    assert load_config(env={"CHALIE_STORE__TRANSCRIPT_DAYS": "365"}).store.transcript_days \
        == 365
    error = _config_error(tmp_path, {"store": {"transcript_days": -1.0}})
    assert error.key == "store.transcript_days"


def test_negative_retries_are_refused_but_zero_is_fine(tmp_path: Path) -> None:
    """llm.retries may be 0 (no retry) but not negative."""
    assert load_config(env={"CHALIE_LLM__RETRIES": "0"}).llm.retries == 0
    error = _config_error(tmp_path, env={"CHALIE_LLM__RETRIES": "-1"})
    assert error.key == "llm.retries"


def test_an_unknown_embed_precision_is_refused(tmp_path: Path) -> None:
    """memory.embed_precision is "int8" (the default) or "float32"; "int4" is reported by
    its key."""
    assert load_config().memory.embed_precision == "int8"
    assert _config_error(tmp_path, {"memory": {"embed_precision": "int4"}}).key == \
        "memory.embed_precision"


def test_port_out_of_range_is_refused(tmp_path: Path) -> None:
    """A port above 65535 is reported as a bad server.port."""
    assert _config_error(tmp_path, {"server": {"port": 70000}}).key == "server.port"


def test_script_provider_without_script_file_is_refused(tmp_path: Path) -> None:
    """llm.provider = "script" with no llm.script names llm.script as what is missing."""
    error = _config_error(tmp_path, {"llm": {"provider": "script"}})
    assert error.key == "llm.script"
    assert "llm.script" in str(error)


def test_missing_user_file_is_refused(tmp_path: Path) -> None:
    """--config pointing at no file says the file was not found."""
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "absent.toml")


# --- through the command line ---------------------------------------------------------------------

class _ServerMustNotStart:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the server was started despite a configuration error")


def test_cli_unknown_key_exits_2_with_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chalie serve --config FILE` with an unknown key prints one line naming it and exits 2."""
    monkeypatch.setattr(cli, "Server", _ServerMustNotStart)
    path = write_config(tmp_path, {"server": {"prot": 9000}})
    code = cli.main(["serve", "--config", str(path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("chalie: config error: server.prot: unknown key")


def test_cli_missing_config_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --config path that does not exist exits 2 before anything starts."""
    monkeypatch.setattr(cli, "Server", _ServerMustNotStart)
    code = cli.main(["serve", "--config", str(tmp_path / "nope.toml")])
    assert code == 2
    assert "file not found" in capsys.readouterr().err


# --- MCP servers --------------------------------------------------------------------------------

def _mcp(tmp_path: Path, servers: str) -> Path:
    path = tmp_path / "mcp.toml"
    path.write_text(servers)
    return path


def test_mcp_servers_are_read_from_arrays_of_tables(tmp_path: Path) -> None:
    """A stdio server and an HTTP server, each with what it needs."""
    config = load_config(_mcp(tmp_path, """
[[mcp.servers]]
name = "time"
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]

[[mcp.servers]]
name = "search"
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer x" }
"""))
    time_server, search = config.mcp.servers
    assert (time_server.name, time_server.command, time_server.args) == (
        "time", "mcp-server-time", ("--local-timezone", "UTC"))
    assert (search.url, search.headers) == ("http://127.0.0.1:9000/mcp",
                                            {"Authorization": "Bearer x"})


@pytest.mark.parametrize(("servers", "key", "problem"), [
    ('[[mcp.servers]]\nname = "t"\n', "mcp.servers[0]", "either `command`"),
    ('[[mcp.servers]]\nname = "t"\ncommand = "a"\nurl = "http://x"\n', "mcp.servers[0]",
     "not both"),
    ('[[mcp.servers]]\nname = "a b"\ncommand = "a"\n', "mcp.servers[0].name", "letters"),
    ('[[mcp.servers]]\nname = "t"\ncommand = "a"\n[[mcp.servers]]\nname = "t"\ncommand = "b"\n',
     "mcp.servers[1].name", "two servers"),
    ('[[mcp.servers]]\nname = "t"\nurl = "ftp://x"\n', "mcp.servers[0].url", "http"),
    ('[[mcp.servers]]\nname = "t"\ncommand = "a"\ncolour = 1\n', "mcp.servers", "colour"),
])
def test_a_bad_mcp_server_is_refused_naming_its_entry(tmp_path: Path, servers: str, key: str,
                                                      problem: str) -> None:
    """Start-up stops with the entry and what is wrong with it."""
    with pytest.raises(ConfigError) as caught:
        load_config(_mcp(tmp_path, servers))
    assert caught.value.key.startswith(key)
    assert problem in str(caught.value)


def test_the_notify_channel_must_be_a_channel_name(tmp_path: Path) -> None:
    """interfaces.notify_channel is checked like a /ws channel."""
    error = _config_error(tmp_path, {"interfaces": {"notify_channel": "no spaces"}})
    assert error.key == "interfaces.notify_channel"


# --- the models' jobs ---------------------------------------------------------------------------

def test_llm_keys_still_set_every_job_and_environment_reaches_a_job(tmp_path: Path) -> None:
    """CHALIE_LLM__MODEL sets both jobs; CHALIE_LLM__LIGHT__MODEL only the light one."""
    config = load_config(None, env={"CHALIE_LLM__MODEL": "big",
                                    "CHALIE_LLM__LIGHT__MODEL": "small",
                                    "CHALIE_LLM__PRIMARY__FALLBACK__MAX_TOKENS": "512"})
    primary, light = config.llm.job("primary"), config.llm.job("light")
    assert primary is not None
    assert light is not None
    assert (primary.model, light.model) == ("big", "small")
    fallback = config.llm.job("primary", fallback=True)
    assert fallback is not None
    assert (fallback.model, fallback.max_tokens) == ("big", 512)
    assert config.llm.job("light", fallback=True) is None


def test_an_unknown_key_in_a_job_is_refused_by_its_dotted_name(tmp_path: Path) -> None:
    """[llm.primary] modle = ... names llm.primary.modle; in a fallback, its own path."""
    assert _config_error(tmp_path, {"llm": {"primary": {"modle": "x"}}}).key == \
        "llm.primary.modle"
    error = _config_error(tmp_path, {"llm": {"light": {"fallback": {"urls": "x"}}}})
    assert error.key == "llm.light.fallback.urls"


def test_a_jobs_bad_value_names_the_key_it_was_set_under(tmp_path: Path) -> None:
    """A non-positive context window set for the light job names llm.light.context_window."""
    error = _config_error(tmp_path, {"llm": {"light": {"context_window": 0}}})
    assert error.key == "llm.light.context_window"


def test_the_stall_timeout_is_set_for_all_jobs_or_for_one(tmp_path: Path) -> None:
    """llm.stall_timeout_s is every job's unless a job sets its own; zero is refused by the
    key it was set under."""
    config = load_config(None, env={"CHALIE_LLM__LIGHT__STALL_TIMEOUT_S": "300"})
    primary, light = config.llm.job("primary"), config.llm.job("light")
    assert primary is not None
    assert light is not None
    assert (primary.stall_timeout_s, light.stall_timeout_s) == (60.0, 300.0)
    error = _config_error(tmp_path, {"llm": {"primary": {"stall_timeout_s": 0}}})
    assert error.key == "llm.primary.stall_timeout_s"


def test_llamacpp_needs_a_model_file_and_http_providers_a_url(tmp_path: Path) -> None:
    """provider = llamacpp with an empty model, or anthropic with a base_url that is no URL."""
    error = _config_error(tmp_path, {"llm": {"primary": {"provider": "llamacpp", "model": ""}}})
    assert error.key == "llm.primary.model"
    error = _config_error(tmp_path, {"llm": {"provider": "anthropic", "base_url": "api"}})
    assert error.key == "llm.base_url"
