"""Settings saved from the browser (or `chalie setup`): `settings.toml` in the data directory.

The configuration is layered: the shipped defaults (config/chalie.toml) < the config file
(`--config`) < the saved settings < the environment (CHALIE_<SECTION>__<KEY>). Only the keys in
SETTABLE can be saved; each says whether it takes effect while the server runs (chalie/reload.py
decides: a key the running server cannot take is saved and waits for a restart, never applied
half-way) and whether it is a secret (its value is never sent back: only whether it is set;
notify.urls, a list of Apprise URLs, is shown masked by the edge: chalie/edge/rest_settings.py).
A key the environment sets is locked: the environment wins, so saving it would change nothing.

The file is TOML in the config file's own shape ([llm], [llm.primary], [dmn]...), written
whole, atomically, readable by the owner only (0600).
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chalie.config import Config
from chalie.config_load import ENV_PREFIX, load_config
from chalie.errors import ConfigError
from chalie.reload import RELOADABLE

FILE_NAME = "settings.toml"

_MODEL_KEYS = ("provider", "base_url", "api_key", "model", "context_window")
_JOB_TABLES = ("llm", "llm.primary", "llm.light", "llm.primary.fallback", "llm.light.fallback")
# Every key a person may change from the browser or `chalie setup`.
SETTABLE: tuple[str, ...] = (
    *(f"{table}.{key}" for table in _JOB_TABLES for key in _MODEL_KEYS),
    "memory.embedder", "dmn.timezone", "dmn.quiet_hours", "dmn.daily_cap",
    "governor.dmn_tokens_per_day", "governor.scheduled_tokens_per_day",
    "governor.goal_tokens_per_day", "governor.encoder_tokens_per_day",
    "tools.confirm", "tools.block",
    "store.transcript_days", "store.tool_calls_days", "store.events_days",
    "store.backups_kept", "store.backup_dir",
    "notify.urls", "notify.kinds", "notify.skip_when_visible", "notify.retry_initial_s",
    "notify.retry_max_s", "notify.give_up_s", "notify.timeout_s", "notify.log_days",
    "push.subject", "push.ttl_s", "telegram.token", "telegram.base_url", "telegram.base_file_url",
    "telegram.pairing_code_ttl_s", "telegram.edit_every_s",
)
SECRETS = frozenset({*(k for k in SETTABLE if k.endswith(".api_key")), "notify.urls",
                     "telegram.token"})


def path_for(config: Config) -> Path:
    """Where the saved settings of the server configured by `config` live."""
    return Path(config.store.path) / FILE_NAME


def read(path: Path) -> dict[str, Any]:
    """The saved settings (nested, as in the file); {} when there are none yet. A key that
    cannot be saved is a ConfigError naming the file: only SETTABLE keys belong there."""
    try:
        with path.open("rb") as f:
            saved = tomllib.load(f)
    except (FileNotFoundError, NotADirectoryError):  # none yet; or store.path is a file,
        return {}  # which the commands that use the data directory report
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(str(path), f"not valid TOML: {e}; fix or delete it") from None
    except OSError as e:  # another user's data directory, most likely
        raise ConfigError(str(path), f"cannot be read: {e.strerror}; run as the user the "
                          "server runs as") from None
    for key, _ in flatten(saved):
        if key not in SETTABLE:
            raise ConfigError(key, f"cannot be saved in {path}: set it in the config file")
    return saved


def load(path: Path | None, env: Mapping[str, str]) -> tuple[Config, dict[str, Any]]:
    """The config in effect: defaults < the file at `path` < the saved settings (found in the
    data directory the first two name) < the environment; and the saved settings."""
    config = load_config(path, env=env)
    saved = read(path_for(config))
    return (load_config(path, env=env, saved=saved) if saved else config), saved


def write(path: Path, saved: Mapping[str, Any]) -> None:
    """Write the saved settings whole: a temporary file beside it (0600), then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("# Saved by Chalie (the settings at /brain, or `chalie setup`). Layered over\n"
                    "# the config file; the environment's CHALIE_* variables win over it.\n")
            f.write(_toml(saved))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def get(nested: Mapping[str, Any], key: str) -> Any:
    """The value at dotted `key` in a nested mapping; KeyError when it is not there."""
    node: Any = nested
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def put(nested: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted `key` in a nested dict (None removes it, and tables left empty)."""
    *tables, leaf = key.split(".")
    chain = [nested]
    for part in tables:
        chain.append(chain[-1].setdefault(part, {}))
    if value is None:
        chain[-1].pop(leaf, None)
        for parent, part in zip(reversed(chain[:-1]), reversed(tables), strict=True):
            if not parent[part]:
                del parent[part]
    else:
        chain[-1][leaf] = value


def env_name(key: str) -> str:
    """The environment variable that sets dotted `key` (and so locks it)."""
    section, _, rest = key.partition(".")
    return ENV_PREFIX + section.upper() + "__" + rest.replace(".", "__").upper()


@dataclass(frozen=True)
class Described:
    key: str
    value: Any  # None for a secret (see `set`)
    source: str  # "default", "file", "settings" or "environment"
    live: bool  # takes effect while the server runs
    locked: bool  # set by the environment: cannot be saved
    secret: bool
    set: bool  # whether it has a value other than empty (what a secret shows)
    pending: bool  # saved, and in effect only after a restart

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "source": self.source, "live": self.live,
                "locked": self.locked, "secret": self.secret, "set": self.set,
                "pending": self.pending}


def describe(config: Config, in_effect: Config, *, file: Mapping[str, Any],
             saved: Mapping[str, Any], env: Mapping[str, str]) -> list[Described]:
    """Each settable key as configured (`config`, the layers as they are now): its value, the
    layer it came from, whether it applies live, whether the environment locks it, whether it
    waits for a restart (differs from `in_effect`); a secret's value is never included."""
    out = []
    for key in SETTABLE:
        value = _effective(config, key)
        locked = env_name(key) in env
        source = "environment" if locked else "settings" if _has(saved, key) \
            else "file" if _has(file, key) else "default"
        secret = key in SECRETS
        out.append(Described(key, None if secret else value, source, is_live(key), locked,
                             secret, value not in (None, "", (), []),
                             value != _effective(in_effect, key)))
    return out


def is_live(key: str) -> bool:
    return key in RELOADABLE


def _has(nested: Mapping[str, Any], key: str) -> bool:
    try:
        get(nested, key)
    except KeyError:
        return False
    return True


def _effective(config: Config, key: str) -> Any:
    """A key's value in `config`; a job's table key without a value of its own is the [llm]
    one it falls back to."""
    parts = key.split(".")
    if parts[0] == "llm" and len(parts) > 2:
        job = config.llm.job(parts[1], fallback=len(parts) == 4)
        return None if job is None else getattr(job, parts[-1])
    node: Any = config
    for part in parts:
        node = getattr(node, part)
    return list(node) if isinstance(node, tuple) else node


def _toml(nested: Mapping[str, Any]) -> str:
    """Nested settings as TOML: plain keys first, then each table (dotted headers)."""
    lines: list[str] = []

    def table(prefix: str, node: Mapping[str, Any]) -> None:
        plain = [(k, v) for k, v in node.items() if not isinstance(v, Mapping)]
        if plain and prefix:
            lines.append(f"\n[{prefix}]")
        lines.extend(f"{k} = {_value(v)}" for k, v in plain)
        for k, v in node.items():
            if isinstance(v, Mapping):
                table(f"{prefix}.{k}" if prefix else k, v)

    table("", nested)
    return "\n".join(lines).lstrip("\n") + "\n"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def flatten(nested: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf."""
    for k, v in nested.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, Mapping):
            yield from flatten(v, key)
        else:
            yield key, v
