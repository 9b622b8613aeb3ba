"""contrib/: the example systemd unit and production config a person installs as they are."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chalie.cli import main
from chalie.config_load import load_config
from chalie.paths import ROOT

CONTRIB = ROOT / "contrib"
UNIT = CONTRIB / "chalie.service"
INSTALLED = "/opt/chalie/.venv/bin/chalie"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string(UNIT.read_text())
    return parser


def test_the_unit_restarts_on_failure_as_its_own_user_and_reloads_on_sighup() -> None:
    """Restart=on-failure (not after a config error), a dedicated user, SIGHUP for reload."""
    service = unit()["Service"]
    assert (service["Restart"], service["RestartSec"]) == ("on-failure", "5")
    assert service["RestartPreventExitStatus"] == "2"  # `chalie serve`'s configuration error
    assert (service["User"], service["Group"]) == ("chalie", "chalie")
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["StateDirectory"] == "chalie"
    assert unit()["Install"]["WantedBy"] == "multi-user.target"


def test_the_unit_waits_longer_than_a_clean_shutdown_takes() -> None:
    """systemd's stop timeout covers server.shutdown_grace_s and the actors' stop (30 s)."""
    grace = load_config().server.shutdown_grace_s
    assert float(unit()["Service"]["TimeoutStopSec"]) > grace + 30


def test_the_unit_runs_a_command_chalie_has(capsys: pytest.CaptureFixture[str]) -> None:
    """ExecStart's arguments are `chalie serve --config FILE` as the CLI parses them: with no
    such file it stops with the configuration error naming the file."""
    program, *args = shlex.split(unit()["Service"]["ExecStart"])
    assert program == INSTALLED
    assert args[0] == "serve"
    config = Path(args[args.index("--config") + 1])
    if config.exists():
        pytest.skip(f"{config} exists on this machine: `chalie serve` would start")
    assert main(args) == 2
    assert f"{config}: file not found" in capsys.readouterr().err


def test_the_example_config_loads_and_is_set_up_for_a_proxy() -> None:
    """contrib/chalie.toml.example is a valid config: loopback only, Secure cookie, daily
    backups, a metrics token, and its store in the unit's StateDirectory."""
    config = load_config(CONTRIB / "chalie.toml.example")
    assert config.server.host == "127.0.0.1"
    assert config.auth.secure_cookie
    assert config.store.backups_kept > 0
    assert config.server.metrics_token
    assert config.store.path.startswith(unit()["Service"]["WorkingDirectory"] + "/")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """`systemd-analyze verify` finds nothing wrong (ExecStart pointed at this checkout's
    chalie, since /opt/chalie is where a person installs it)."""
    here = Path(sys.executable).parent / "chalie"
    if not here.exists():
        pytest.skip(f"no {here} to point ExecStart at")
    copy = tmp_path / "chalie.service"
    copy.write_text(UNIT.read_text().replace(INSTALLED, str(here)))
    done = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
