"""Loading the configuration: shipped defaults, then a user file, then CHALIE_<SECTION>__<KEY>.

`load_config` reads config/chalie.toml (every default) and the user's TOML file, merges them
with the environment's CHALIE_<SECTION>__<KEY> variables over them (CHALIE_LLM__PRIMARY__MODEL
reaches a job's table; an environment string is read as the key's declared type), converts
the result into a Config (chalie/config.py, the shape) and checks what types alone cannot say:
positive and non-negative settings, ranges, channel and MCP server names, the quiet hours, each
LLM job's endpoint as it will be used. Anything wrong is a ConfigError naming the dotted key.
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from chalie.config import (
    CHANNEL_RE,
    CONTEXT_SHARES,
    JOBS,
    MCP_NAME_RE,
    OVERRIDABLE,
    Config,
    LlmConfig,
    McpConfig,
    MemoryConfig,
    parse_span,
)
from chalie.errors import ConfigError
from chalie.paths import DEFAULT_CONFIG

ENV_PREFIX = "CHALIE_"

_FIELD_TYPES: dict[str, dict[str, Any]] = {
    f.name: {g.name: g.type for g in msgspec.structs.fields(f.type)}
    for f in msgspec.structs.fields(Config)
}

_POSITIVE = {
    "server.max_frame_bytes", "server.shutdown_grace_s", "store.busy_timeout_ms",
    "auth.session_days", "llm.context_window", "llm.request_timeout_s", "llm.max_tokens",
    "llm.stall_timeout_s",
    "images.max_bytes", "act.max_iterations",
    "act.timeout_s", "act.workers", "act.max_tool_result_chars", "supervisor.max_restarts",
    "supervisor.within_s", "server.ping_interval_s", "server.ping_misses",
    "act.compaction_threshold", "act.approval_timeout_s", "act.held_approval_days",
    "auth.max_failures", "auth.lockout_s",
    "store.reply_timeout_s", "store.fault_probe_s", "store.tool_calls_days",
    "store.events_days", "store.prune_interval_s", "store.prune_batch", "store.vacuum_pages",
    "server.session_idle_s", "server.max_body_bytes", "auth.rotate_days",
    "openai.repeat_window_s",
    "interfaces.pair_max_failures", "interfaces.pair_lockout_s", "memory.embed_timeout_s",
    "memory.query_embed_timeout_s", "memory.embed_threads",
    "memory.embed_batch", "memory.encode_every_rows", "memory.encode_max_rows",
    "memory.recall_k", "memory.recency_days", "memory.snapshots_kept", "context.reply_reserve",
    "memory.update_candidates",
    "interfaces.pairing_key_ttl_s", "interfaces.health_interval_s", "interfaces.health_failures",
    "interfaces.health_timeout_s", "interfaces.connect_timeout_s", "interfaces.execute_timeout_s",
    "interfaces.max_response_bytes", "signals.rate_per_min", "signals.world_max",
    "signals.half_life_s", "signals.top_k", "signals.flush_s",
    "subscriptions.reconnect_initial_s", "subscriptions.reconnect_max_s",
    "subscriptions.connect_timeout_s", "mcp.connect_timeout_s", "mcp.call_timeout_s",
    "mcp.restart_initial_s", "mcp.restart_max_s", "dmn.idle_s", "dmn.cadence_s",
    "dmn.max_iterations", "dmn.timeout_s", "dmn.deferred_max_age_s", "scheduler.max_iterations",
    "scheduler.timeout_s", "goals.max_iterations", "goals.timeout_s", "goals.max_running",
    "goals.retry_backoff_s", "goals.progress_every_s", "goals.expire_days",
    "cognition.recent_topics", "cognition.focus_after",
    "cognition.silence_gap_s", "cognition.gist_ttl_s", "cognition.social_max_chars",
    "governor.failure_backoff_s", "governor.failure_backoff_max_s",
    "notify.retry_initial_s", "notify.retry_max_s", "notify.give_up_s", "notify.timeout_s",
    "notify.log_days", "telegram.pairing_code_ttl_s",
}
_NON_NEGATIVE = {
    "llm.retries", "llm.retry_backoff_s", "llm.max_retry_after_s", "llm.threads",
    "act.history_turns", "supervisor.backoff_initial_s",
    "supervisor.backoff_max_s", "memory.retrieval_decay", "memory.index_delay_s",
    "memory.encoder_known_facts", "memory.feedback_weight",
    "context.identity", "context.state", "context.memory", "context.tools", "context.history",
    "signals.min_salience", "dmn.signal_debounce_s", "dmn.busy_s", "dmn.boot_delay_s",
    "dmn.daily_cap", "scheduler.catch_up_s",
    "goals.step_retries", "governor.dmn_tokens_per_day", "governor.scheduled_tokens_per_day",
    "governor.goal_tokens_per_day", "governor.encoder_tokens_per_day",
    "cognition.topic_threshold", "cognition.topic_cosine",
    "store.backups_kept", "store.hold_messages", "store.min_free_mb", "store.transcript_days",
    "server.rest_rate_per_min",
    "push.ttl_s", "telegram.edit_every_s",
}


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    defaults: Path = DEFAULT_CONFIG,
    saved: Mapping[str, Any] | None = None,
) -> Config:
    """Merge the defaults, the file at `path`, the `saved` settings (chalie/settings.py) and the
    environment, in that order, into one checked Config."""
    merged = _read_toml(defaults)
    if path is not None:
        _merge(merged, _read_toml(path), source=str(path))
    if saved:
        _merge(merged, copy.deepcopy(dict(saved)), source="the saved settings")
    if env is not None:
        _merge(merged, _env_overrides(env), source="environment", strict_types=False)
    return _convert(merged)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(str(path), "file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(str(path), f"not valid TOML: {e}") from None


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].partition("__")
        *tables, leaf = key.lower().split("__")
        target = out.setdefault(section.lower(), {})
        for table in tables:  # CHALIE_LLM__PRIMARY__FALLBACK__MODEL
            target = target.setdefault(table, {})
            if not isinstance(target, dict):
                raise ConfigError(name, "names a key and a table of the same name")
        target[leaf] = value
    return out


def _merge(
    base: dict[str, Any], over: dict[str, Any], *, source: str, strict_types: bool = True
) -> None:
    for section, values in over.items():
        if section not in base:
            raise ConfigError(section, f"unknown section (from {source})")
        if not isinstance(values, dict):
            raise ConfigError(section, f"must be a table (from {source})")
        for key, value in values.items():
            if key not in base[section]:
                raise ConfigError(f"{section}.{key}", f"unknown key (from {source})")
            if section == "llm" and key in JOBS:
                base[section][key] = _merge_job(base[section][key], value, f"llm.{key}",
                                                source=source, strict_types=strict_types)
                continue
            base[section][key] = value if strict_types else _coerce_env(section, key, value)


def _merge_job(base: dict[str, Any], over: Any, where: str, *, source: str,
               strict_types: bool) -> dict[str, Any]:
    """[llm.primary] / [llm.light] (and their `fallback` tables) over what is there already."""
    if not isinstance(over, dict):
        raise ConfigError(where, f"must be a table (from {source})")
    merged = dict(base)
    for key, value in over.items():
        if key == "fallback" and where.count(".") == 1:
            merged[key] = _merge_job(merged.get(key) or {}, value, f"{where}.fallback",
                                     source=source, strict_types=strict_types)
        elif key in OVERRIDABLE:
            merged[key] = value if strict_types else _coerce_env("llm", key, value)
        else:
            raise ConfigError(f"{where}.{key}", f"unknown key (from {source})")
    return merged


def _coerce_env(section: str, key: str, raw: str) -> Any:
    """Read an environment string as the declared type of `section.key`; a list is given as
    comma-separated items (CHALIE_TOOLS__CONFIRM=memory,forget)."""
    kind = _FIELD_TYPES[section][key]
    value: Any = raw
    if getattr(kind, "__origin__", None) in (tuple, list):
        value = [item.strip() for item in raw.split(",") if item.strip()]
    try:
        return msgspec.convert(value, kind, strict=False)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{section}.{key}", f"{e} (from environment: {raw!r})") from None


_PATH_RE = re.compile(r"at `\$\.([\w.\[\]]+)`")


def _convert(merged: dict[str, Any]) -> Config:
    try:
        config = msgspec.convert(merged, Config)
    except msgspec.ValidationError as e:
        text = str(e)
        found = _PATH_RE.search(text)
        key = found.group(1) if found else "config"
        raise ConfigError(key, _PATH_RE.sub("", text).rstrip(" -")) from None
    for section_name in Config.__struct_fields__:
        section = getattr(config, section_name)
        for key in section.__struct_fields__:
            dotted = f"{section_name}.{key}"
            value = getattr(section, key)
            if dotted in _POSITIVE and value <= 0:
                raise ConfigError(dotted, f"must be greater than 0, got {value}")
            if dotted in _NON_NEGATIVE and value < 0:
                raise ConfigError(dotted, f"must not be negative, got {value}")
    if config.act.compaction_threshold > 1:
        raise ConfigError("act.compaction_threshold",
                          f"must be at most 1, got {config.act.compaction_threshold}")
    if config.store.events_kept < 200:
        raise ConfigError("store.events_kept",
                          f"must be at least 200, got {config.store.events_kept}")
    if not 0 <= config.server.port <= 65535:
        raise ConfigError("server.port", f"must be 0-65535, got {config.server.port}")
    shares = sum(getattr(config.context, name) for name in CONTEXT_SHARES)
    if abs(shares - 1.0) > 1e-6:
        raise ConfigError("context", "identity + state + memory + tools + history must add up "
                          f"to 1, got {shares:g}")
    reserve, threshold = config.context.reply_reserve, config.act.compaction_threshold
    if not 1 - threshold <= reserve < 1:
        raise ConfigError("context.reply_reserve",
                          f"must be at least 1 - act.compaction_threshold ({1 - threshold:g}) and "
                          f"below 1, got {reserve:g}: a prompt whose sections are full would "
                          "otherwise be compacted before its first call")
    _check_memory(config.memory)
    if not CHANNEL_RE.match(config.interfaces.notify_channel):
        raise ConfigError("interfaces.notify_channel",
                          "1-64 letters, digits, '_', '.' or '-' (a /ws channel name), got "
                          f"{config.interfaces.notify_channel!r}")
    if not config.signals.min_salience < 1:
        raise ConfigError("signals.min_salience",
                          f"must be below 1, got {config.signals.min_salience:g}")
    _check_mcp(config.mcp)
    try:
        parse_span(config.dmn.quiet_hours)
    except ValueError as e:
        raise ConfigError("dmn.quiet_hours", str(e)) from None
    if not CHANNEL_RE.match(config.dmn.channel):
        raise ConfigError("dmn.channel",
                          "1-64 letters, digits, '_', '.' or '-' (a /ws channel name), got "
                          f"{config.dmn.channel!r}")
    if not config.dmn.timezone.strip():
        raise ConfigError("dmn.timezone", "an IANA zone name (e.g. Europe/London) or 'local'")
    if not 0 < config.dmn.signal_wake <= 1:
        raise ConfigError("dmn.signal_wake",
                          f"a salience above 0 and at most 1, got {config.dmn.signal_wake:g}")
    if not config.push.subject.startswith(("mailto:", "https://")):
        raise ConfigError("push.subject", "a mailto: or https: address (the contact push "
                          f"services see), got {config.push.subject!r}")
    for key in ("base_url", "base_file_url"):
        if not getattr(config.telegram, key).startswith(("https://", "http://")):
            raise ConfigError(f"telegram.{key}", "an http(s) address, got "
                              f"{getattr(config.telegram, key)!r}")
    _check_llm(config.llm)
    return config


def _check_memory(memory: MemoryConfig) -> None:
    if memory.encode_max_rows < memory.encode_every_rows:
        raise ConfigError("memory.encode_max_rows",
                          f"must be at least memory.encode_every_rows "
                          f"({memory.encode_every_rows}), got {memory.encode_max_rows}")
    if not -1 <= memory.update_similarity < 1:
        raise ConfigError("memory.update_similarity",
                          f"must be a cosine similarity from -1 to below 1, got "
                          f"{memory.update_similarity:g}")


def _check_llm(llm: LlmConfig) -> None:
    """Every job's endpoint, and its fallback's, as it will be used."""
    for job in JOBS:
        for fallback in (False, True):
            resolved = llm.job(job, fallback=fallback)
            if resolved is None:
                continue
            for field in OVERRIDABLE:
                dotted, value = f"llm.{field}", getattr(resolved, field)
                key = llm.key(job, field, fallback=fallback)
                if dotted in _POSITIVE and value <= 0:
                    raise ConfigError(key, f"must be greater than 0, got {value}")
                if dotted in _NON_NEGATIVE and value < 0:
                    raise ConfigError(key, f"must not be negative, got {value}")
            if resolved.provider == "script" and not resolved.script:
                raise ConfigError(llm.key(job, "script", fallback=fallback),
                                  "must name a script file when the provider is 'script'")
            if resolved.provider == "llamacpp" and not resolved.model.strip():
                raise ConfigError(llm.key(job, "model", fallback=fallback),
                                  "must be the path of a GGUF file when the provider is "
                                  "'llamacpp'")
            if resolved.provider in ("openai", "anthropic") and not resolved.base_url \
                    .startswith(("http://", "https://")):
                raise ConfigError(llm.key(job, "base_url", fallback=fallback),
                                  f"must be an http:// or https:// URL, got "
                                  f"{resolved.base_url!r}")


def _check_mcp(mcp: McpConfig) -> None:
    seen: set[str] = set()
    for n, server in enumerate(mcp.servers):
        where = f"mcp.servers[{n}]"
        if not MCP_NAME_RE.match(server.name):
            raise ConfigError(f"{where}.name", "1-32 letters, digits, '_' or '-' (it prefixes "
                              f"the server's tool names), got {server.name!r}")
        if server.name in seen:
            raise ConfigError(f"{where}.name", f"two servers are named {server.name!r}")
        seen.add(server.name)
        if bool(server.command) == bool(server.url):
            raise ConfigError(where, "give either `command` (a stdio server) or `url` (a "
                              "streamable HTTP server), not both and not neither")
        if server.url and not server.url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.url", f"must be an http:// or https:// URL, got "
                              f"{server.url!r}")
        if server.command and (server.headers):
            raise ConfigError(f"{where}.headers", "only for `url` servers")
        if server.url and (server.args or server.env):
            raise ConfigError(f"{where}.args", "`args` and `env` are only for `command` servers")
