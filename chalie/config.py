"""The shape of the configuration: what a Config is, not how it is read.

One frozen msgspec struct per TOML section (ServerConfig for [server], LlmConfig for [llm], ...),
gathered in `Config`; `LlmConfig.job()` resolves a job's ([llm.primary], [llm.light]) settings
and `LlmConfig.key()` names the key a setting came from. Beside them, the names other modules
check values against: the LLM jobs (`JOBS`), a /ws channel name (`CHANNEL_RE`), an MCP server
name (`MCP_NAME_RE`), the context shares (`CONTEXT_SHARES`), and `parse_span`, which reads a
`dmn.quiet_hours` span.

Every default lives in config/chalie.toml; the structs give only shape and types (a key missing
from that file is a bug the tests catch); chalie/config_load.py reads and checks a Config.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

CHANNEL_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # a /ws channel name
MCP_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # prefixes its tools' names
SPAN_RE = re.compile(r"^\s*([01]?\d|2[0-3]):([0-5]\d)\s*-\s*([01]?\d|2[0-3]):([0-5]\d)\s*$")
CONTEXT_SHARES = ("identity", "state", "memory", "tools", "history")


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
    hold_messages: int
    fault_probe_s: float
    min_free_mb: float
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
    stall_timeout_s: float | None = None
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
    stall_timeout_s: float
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
        values = {f: getattr(self, f) for f in OVERRIDABLE}
        for layer in layers:
            values.update({f: v for f in OVERRIDABLE if (v := getattr(layer, f)) is not None})
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


# The [llm] keys a job or a fallback may set over [llm]'s own.
OVERRIDABLE = tuple(LlmOverride.__struct_fields__)


class ActConfig(_Section, frozen=True):
    max_iterations: int
    timeout_s: float
    history_turns: int
    workers: int
    max_tool_result_chars: int
    compaction_threshold: float
    approval_timeout_s: float
    held_approval_days: float


class MemoryConfig(_Section, frozen=True):
    embedder: Literal["minilm", "hashed", "openai", "local"]
    embed_model_path: str
    embed_weights_url: str
    embed_threads: int
    embed_precision: Literal["float32", "int8"]
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
    feedback_weight: float
    snapshots_kept: int
    update_candidates: int
    update_similarity: float
    encoder_known_facts: int


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


class OpenAiConfig(_Section, frozen=True):
    repeat_window_s: float


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
    signal_wake: float
    signal_debounce_s: float
    busy_s: float


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
    progress_every_s: float
    expire_days: float


class GovernorConfig(_Section, frozen=True):
    dmn_tokens_per_day: int
    scheduled_tokens_per_day: int
    goal_tokens_per_day: int
    encoder_tokens_per_day: int
    failure_backoff_s: float
    failure_backoff_max_s: float

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
    topic_cosine: float
    recent_topics: int
    focus_after: int
    silence_gap_s: float
    gist_ttl_s: float
    social_phrases: list[str]
    social_max_chars: int
    critic: bool
    consequential: list[str]


NOTIFY_KINDS = ("notifications", "escalations", "goal_results", "scheduled_results")
NotifyKind = Literal["notifications", "escalations", "goal_results", "scheduled_results"]


class NotifyConfig(_Section, frozen=True):
    urls: list[str]
    kinds: list[NotifyKind]
    skip_when_visible: bool
    retry_initial_s: float
    retry_max_s: float
    give_up_s: float
    timeout_s: float
    log_days: float


class PushConfig(_Section, frozen=True):
    subject: str
    ttl_s: int


class TelegramConfig(_Section, frozen=True):
    token: str
    base_url: str
    base_file_url: str
    pairing_code_ttl_s: float
    edit_every_s: float


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
    openai: OpenAiConfig
    dmn: DmnConfig
    scheduler: SchedulerConfig
    goals: GoalsConfig
    governor: GovernorConfig
    supervisor: SupervisorConfig
    images: ImagesConfig
    cognition: CognitionConfig
    notify: NotifyConfig
    push: PushConfig
    telegram: TelegramConfig
    log: LogConfig


def parse_span(text: str) -> tuple[int, int] | None:
    """"23:00-08:00" as (start, end) minutes after midnight; "" as None (no quiet hours).
    Raises ValueError naming the expected form."""
    if not text.strip():
        return None
    found = SPAN_RE.match(text)
    if found is None:
        raise ValueError(f"must be HH:MM-HH:MM (e.g. 23:00-08:00) or empty, got {text!r}")
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    return h1 * 60 + m1, h2 * 60 + m2
