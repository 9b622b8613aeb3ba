"""Typed configuration: shipped defaults, then a user file, then CHALIE_<SECTION>__<KEY>.

Every default lives in config/chalie.toml; the structs below only give the shape and types,
so a key missing from the defaults file is a bug the tests catch.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from chalie.background.attention import parse_span
from chalie.errors import ConfigError
from chalie.paths import DEFAULT_CONFIG

ENV_PREFIX = "CHALIE_"
CHANNEL_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # a /ws channel name
MCP_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # prefixes its tools' names


class _Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


class ServerConfig(_Section, frozen=True):
    host: str
    port: int
    max_frame_bytes: int
    shutdown_grace_s: float
    ping_interval_s: float
    ping_misses: int
    session_idle_s: float
    max_body_bytes: int
    rest_rate_per_min: int
    metrics_token: str
    trust_proxy_headers: bool


class StoreConfig(_Section, frozen=True):
    path: str
    synchronous: Literal["FULL", "NORMAL"]
    busy_timeout_ms: int
    events_kept: int
    reply_timeout_s: float
    transcript_days: float
    tool_calls_days: float
    events_days: float
    prune_interval_s: float
    prune_batch: int
    vacuum_pages: int
    backups_kept: int
    backup_dir: str


class AuthConfig(_Section, frozen=True):
    password: str
    session_days: float
    rotate_days: float
    max_failures: int
    lockout_s: float
    secure_cookie: bool


Provider = Literal["openai", "anthropic", "llamacpp", "script"]
JOBS = ("primary", "light")


class LlmOverride(_Section, frozen=True):
    """A job's (or a fallback's) own settings: each key it names replaces [llm]'s."""

    provider: Provider | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    context_window: int | None = None
    request_timeout_s: float | None = None
    retries: int | None = None
    retry_backoff_s: float | None = None
    max_retry_after_s: float | None = None
    stream: bool | None = None
    tools: bool | None = None
    vision: bool | None = None
    max_tokens: int | None = None
    anthropic_version: str | None = None
    threads: int | None = None
    script: str | None = None


class LlmJob(LlmOverride, frozen=True):
    """[llm.primary] or [llm.light]: overrides of [llm], and an optional fallback model."""

    fallback: LlmOverride | None = None


class LlmConfig(_Section, frozen=True):
    """[llm]: the model settings every job starts from. `job()` resolves one job's endpoint."""

    provider: Provider
    base_url: str
    model: str
    api_key: str
    context_window: int
    request_timeout_s: float
    retries: int
    retry_backoff_s: float
    max_retry_after_s: float
    stream: bool
    tools: bool
    vision: bool
    max_tokens: int
    anthropic_version: str
    threads: int
    script: str
    primary: LlmJob = LlmJob()
    light: LlmJob = LlmJob()

    def job(self, name: str, *, fallback: bool = False) -> LlmConfig | None:
        """The settings of job `name` ("primary" or "light"): [llm] with the job's own keys
        over it, and for its fallback, the fallback's keys over those. None when a fallback is
        asked for and the job has none."""
        job: LlmJob = getattr(self, name)
        layers: list[LlmOverride] = [job]
        if fallback:
            if job.fallback is None:
                return None
            layers.append(job.fallback)
        values = {f: getattr(self, f) for f in _OVERRIDABLE}
        for layer in layers:
            values.update({f: v for f in _OVERRIDABLE if (v := getattr(layer, f)) is not None})
        return LlmConfig(**values)

    def key(self, job: str, field: str, *, fallback: bool = False) -> str:
        """The config key a job's setting comes from, for messages that say what to change:
        llm.primary.fallback.model, llm.light.base_url, or llm.api_key."""
        section: LlmJob = getattr(self, job)
        if fallback and section.fallback is not None \
                and getattr(section.fallback, field) is not None:
            return f"llm.{job}.fallback.{field}"
        if getattr(section, field) is not None:
            return f"llm.{job}.{field}"
        return f"llm.{field}"


_OVERRIDABLE = tuple(LlmOverride.__struct_fields__)


class ActConfig(_Section, frozen=True):
    max_iterations: int
    timeout_s: float
    history_turns: int
    workers: int
    max_tool_result_chars: int
    compaction_threshold: float
    approval_timeout_s: float


class MemoryConfig(_Section, frozen=True):
    embedder: Literal["hashed", "openai", "local"]
    embed_base_url: str
    embed_model: str
    embed_api_key: str
    embed_timeout_s: float
    query_embed_timeout_s: float
    embed_batch: int
    index_delay_s: float
    encode_every_rows: int
    encode_max_rows: int
    recall_k: int
    recency_days: float
    retrieval_decay: float
    snapshots_kept: int


class ContextConfig(_Section, frozen=True):
    reply_reserve: float
    identity: float
    state: float
    memory: float
    tools: float
    history: float


class ToolsConfig(_Section, frozen=True):
    confirm: tuple[str, ...]
    block: tuple[str, ...]


class InterfacesConfig(_Section, frozen=True):
    pairing_key_ttl_s: float
    pair_max_failures: int
    pair_lockout_s: float
    health_interval_s: float
    health_failures: int
    health_timeout_s: float
    connect_timeout_s: float
    execute_timeout_s: float
    max_response_bytes: int
    notify_channel: str


class SignalsConfig(_Section, frozen=True):
    rate_per_min: int
    world_max: int
    half_life_s: float
    min_salience: float
    top_k: int
    flush_s: float


class SubscriptionsConfig(_Section, frozen=True):
    reconnect_initial_s: float
    reconnect_max_s: float
    connect_timeout_s: float


class McpServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One `[[mcp.servers]]` entry: a stdio server (`command`, `args`, `env`) or a streamable
    HTTP one (`url`, `headers`)."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    url: str = ""
    headers: dict[str, str] = {}


class McpConfig(_Section, frozen=True):
    servers: tuple[McpServerConfig, ...]
    connect_timeout_s: float
    call_timeout_s: float
    restart_initial_s: float
    restart_max_s: float


class DmnConfig(_Section, frozen=True):
    enabled: bool
    idle_s: float
    cadence_s: float
    boot_delay_s: float
    max_iterations: int
    timeout_s: float
    quiet_hours: str
    timezone: str
    daily_cap: int
    deferred_max_age_s: float
    channel: str


class SchedulerConfig(_Section, frozen=True):
    catch_up_s: float
    max_iterations: int
    timeout_s: float


class GoalsConfig(_Section, frozen=True):
    max_iterations: int
    timeout_s: float
    max_running: int
    step_retries: int
    retry_backoff_s: float


class GovernorConfig(_Section, frozen=True):
    dmn_tokens_per_day: int
    scheduled_tokens_per_day: int
    goal_tokens_per_day: int
    encoder_tokens_per_day: int

    def budgets(self) -> dict[str, int]:
        return {"dmn": self.dmn_tokens_per_day, "scheduled": self.scheduled_tokens_per_day,
                "goal": self.goal_tokens_per_day, "encoder": self.encoder_tokens_per_day}


class SupervisorConfig(_Section, frozen=True):
    backoff_initial_s: float
    backoff_max_s: float
    max_restarts: int
    within_s: float


class ImagesConfig(_Section, frozen=True):
    max_bytes: int


class LogConfig(_Section, frozen=True):
    format: Literal["auto", "json", "console"]
    level: Literal["debug", "info", "warning", "error"]


class CognitionConfig(_Section, frozen=True):
    topic_threshold: float
    recent_topics: int
    focus_after: int
    silence_gap_s: float
    gist_ttl_s: float
    social_phrases: list[str]
    social_max_chars: int
    critic: bool
    consequential: list[str]


class Config(_Section, frozen=True):
    server: ServerConfig
    store: StoreConfig
    auth: AuthConfig
    llm: LlmConfig
    act: ActConfig
    memory: MemoryConfig
    context: ContextConfig
    tools: ToolsConfig
    interfaces: InterfacesConfig
    signals: SignalsConfig
    subscriptions: SubscriptionsConfig
    mcp: McpConfig
    dmn: DmnConfig
    scheduler: SchedulerConfig
    goals: GoalsConfig
    governor: GovernorConfig
    supervisor: SupervisorConfig
    images: ImagesConfig
    cognition: CognitionConfig
    log: LogConfig


_FIELD_TYPES: dict[str, dict[str, Any]] = {
    f.name: {g.name: g.type for g in msgspec.structs.fields(f.type)}
    for f in msgspec.structs.fields(Config)
}

_POSITIVE = {
    "server.max_frame_bytes", "server.shutdown_grace_s", "store.busy_timeout_ms",
    "auth.session_days", "llm.context_window", "llm.request_timeout_s", "llm.max_tokens",
    "images.max_bytes", "act.max_iterations",
    "act.timeout_s", "act.workers", "act.max_tool_result_chars", "supervisor.max_restarts",
    "supervisor.within_s", "server.ping_interval_s", "server.ping_misses",
    "act.compaction_threshold", "act.approval_timeout_s", "auth.max_failures", "auth.lockout_s",
    "store.reply_timeout_s", "store.transcript_days", "store.tool_calls_days",
    "store.events_days", "store.prune_interval_s", "store.prune_batch", "store.vacuum_pages",
    "server.session_idle_s", "server.max_body_bytes", "auth.rotate_days",
    "interfaces.pair_max_failures", "interfaces.pair_lockout_s", "memory.embed_timeout_s",
    "memory.query_embed_timeout_s",
    "memory.embed_batch", "memory.encode_every_rows", "memory.encode_max_rows",
    "memory.recall_k", "memory.recency_days", "memory.snapshots_kept", "context.reply_reserve",
    "interfaces.pairing_key_ttl_s", "interfaces.health_interval_s", "interfaces.health_failures",
    "interfaces.health_timeout_s", "interfaces.connect_timeout_s", "interfaces.execute_timeout_s",
    "interfaces.max_response_bytes", "signals.rate_per_min", "signals.world_max",
    "signals.half_life_s", "signals.top_k", "signals.flush_s",
    "subscriptions.reconnect_initial_s", "subscriptions.reconnect_max_s",
    "subscriptions.connect_timeout_s", "mcp.connect_timeout_s", "mcp.call_timeout_s",
    "mcp.restart_initial_s", "mcp.restart_max_s", "dmn.idle_s", "dmn.cadence_s",
    "dmn.max_iterations", "dmn.timeout_s", "dmn.deferred_max_age_s", "scheduler.max_iterations",
    "scheduler.timeout_s", "goals.max_iterations", "goals.timeout_s", "goals.max_running",
    "goals.retry_backoff_s", "cognition.recent_topics", "cognition.focus_after",
    "cognition.silence_gap_s", "cognition.gist_ttl_s", "cognition.social_max_chars",
}
_NON_NEGATIVE = {
    "llm.retries", "llm.retry_backoff_s", "llm.max_retry_after_s", "llm.threads",
    "act.history_turns", "supervisor.backoff_initial_s",
    "supervisor.backoff_max_s", "memory.retrieval_decay", "memory.index_delay_s",
    "context.identity", "context.state", "context.memory", "context.tools", "context.history",
    "signals.min_salience", "dmn.boot_delay_s", "dmn.daily_cap", "scheduler.catch_up_s",
    "goals.step_retries", "governor.dmn_tokens_per_day", "governor.scheduled_tokens_per_day",
    "governor.goal_tokens_per_day", "governor.encoder_tokens_per_day",
    "cognition.topic_threshold", "store.backups_kept", "server.rest_rate_per_min",
}
CONTEXT_SHARES = ("identity", "state", "memory", "tools", "history")


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    defaults: Path = DEFAULT_CONFIG,
) -> Config:
    """Merge the defaults, the file at `path` and the environment into one checked Config."""
    merged = _read_toml(defaults)
    if path is not None:
        _merge(merged, _read_toml(path), source=str(path))
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
        elif key in _OVERRIDABLE:
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
    memory = config.memory
    if memory.encode_max_rows < memory.encode_every_rows:
        raise ConfigError("memory.encode_max_rows",
                          f"must be at least memory.encode_every_rows "
                          f"({memory.encode_every_rows}), got {memory.encode_max_rows}")
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
    _check_llm(config.llm)
    return config


def _check_llm(llm: LlmConfig) -> None:
    """Every job's endpoint, and its fallback's, as it will be used."""
    for job in JOBS:
        for fallback in (False, True):
            resolved = llm.job(job, fallback=fallback)
            if resolved is None:
                continue
            for field in _OVERRIDABLE:
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
