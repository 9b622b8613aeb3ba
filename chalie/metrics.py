"""Prometheus metrics of one server instance, on its own registry (tests build many)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:  # noqa: PLR0915
        r = self.registry = registry or CollectorRegistry()
        self.turns = Counter("chalie_turns", "Turns finished, by outcome.", ["outcome"], registry=r)
        self.turns_in_flight = Gauge(
            "chalie_turns_in_flight", "Turns started and not yet stored.", registry=r
        )
        self.turn_seconds = Histogram(
            "chalie_turn_seconds",
            "Seconds from receipt of a message to its stored answer.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.llm_calls = Counter(
            "chalie_llm_calls", "LLM requests, by result (ok or error).", ["result"], registry=r
        )
        self.llm_attempts = Counter(
            "chalie_llm_attempts",
            "Attempts at one LLM request (retries and fallbacks included), by provider, model "
            "and outcome (ok, unreachable, server_error, rate_limited, auth, not_found, context, "
            "client_error, bad_response).",
            ["provider", "model", "outcome"],
            registry=r,
        )
        self.llm_fallbacks = Counter(
            "chalie_llm_fallbacks",
            "Requests a job's fallback model answered (or tried) because its model failed.",
            ["job"],
            registry=r,
        )
        self.llm_tokens = Counter(
            "chalie_llm_tokens",
            "Tokens the LLM reported (or that were estimated), by kind (prompt or completion).",
            ["kind"],
            registry=r,
        )
        self.tool_calls = Counter(
            "chalie_tool_calls", "Tool calls, by tool and result (ok or error).",
            ["tool", "result"], registry=r,
        )
        self.actor_restarts = Counter(
            "chalie_actor_restarts", "Actors restarted by their supervisor.", ["actor"], registry=r
        )
        self.frames = Counter(
            "chalie_frames", "Server frames logged and pushed, by type.", ["type"], registry=r
        )
        self.store_batch = Histogram(
            "chalie_store_batch_messages",
            "Messages (frames or turns) written in one store transaction.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.ws_connections = Gauge(
            "chalie_ws_connections", "Open WebSocket connections.", registry=r
        )
        self.sessions = Gauge(
            "chalie_sessions", "Session actors running (one per channel in use).", registry=r
        )
        self.sessions_stopped = Counter(
            "chalie_sessions_stopped",
            "Session actors stopped after server.session_idle_s with nothing to do.", registry=r,
        )
        self.recall_seconds = Histogram(
            "chalie_recall_seconds",
            "Seconds one hybrid recall took (full text, query embedding, vectors, weighting).",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5),
            registry=r,
        )
        self.recall_degraded = Counter(
            "chalie_recall_degraded",
            "Recalls that used full text only because the query could not be embedded.",
            registry=r,
        )
        self.encodings = Counter(
            "chalie_encodings",
            "Transcript windows the Encoder handled, by outcome (encoded, retried: the first "
            "answer was invalid, skipped: invalid twice, failed: the LLM call failed).",
            ["outcome"], registry=r,
        )
        self.episodes = Counter("chalie_episodes", "Episodes stored.", registry=r)
        self.background_backoff = Gauge(
            "chalie_background_backoff",
            "Channels on which a background job waits after failing (its structured answers "
            "unreadable, or its calls failed), by job (encoder, critic).", ["job"], registry=r,
        )
        self.background_skipped = Counter(
            "chalie_background_skipped",
            "Attempts of a background job skipped while it waits after failing, by job.",
            ["job"], registry=r,
        )
        self.embeddings = Counter(
            "chalie_embeddings", "Texts embedded in the background, by result (ok or error).",
            ["result"], registry=r,
        )
        self.vectors_pending = Gauge(
            "chalie_vectors_pending",
            "Items not yet embedded by the current embedder (new, or after a change of embedder).",
            registry=r,
        )
        self.forgotten = Counter(
            "chalie_memory_forgotten", "Memory items forgotten, by kind.", ["kind"], registry=r
        )
        self.signals = Counter(
            "chalie_signals",
            "Signals received, by result (accepted, or rejected: invalid, forbidden, "
            "rate_limited) and by way in (rest, stream, mcp).",
            ["result", "via"], registry=r,
        )
        self.world_signals = Gauge(
            "chalie_world_signals", "Signals held in world state.", registry=r
        )
        self.signals_unattended = Counter(
            "chalie_signals_unattended",
            "Signals kept in world state whose salience was under dmn.signal_wake: they wake "
            "no thought and cost no LLM call.", registry=r,
        )
        self.notifications_sent = Counter(
            "chalie_notifications_sent",
            "Messages delivered away from the page, per send: `channel` webpush, telegram or "
            "the Apprise service (json, ntfy, tgram...); `kind` notifications, escalations, "
            "goal_results or scheduled_results; `result` sent, failed (tried again later, or "
            "given up), gone (the target no longer exists) or skipped (a page was visible).",
            ["channel", "kind", "result"], registry=r,
        )
        self.interfaces_online = Gauge(
            "chalie_interfaces_online", "Paired interfaces whose health checks pass.", registry=r
        )
        self.interfaces_paired = Gauge(
            "chalie_interfaces_paired", "Paired interfaces, online or not.", registry=r
        )
        self.interface_transitions = Counter(
            "chalie_interface_transitions",
            "Interfaces that went offline or came back online.", ["to"], registry=r,
        )
        self.interface_calls = Counter(
            "chalie_interface_tool_calls",
            "Tool calls to interfaces (POST /execute), by result (ok, error: the interface "
            "answered with an error, failed: no usable answer).", ["result"], registry=r,
        )
        self.interface_messages = Counter(
            "chalie_interface_messages", "Messages from interfaces (POST /api/messages).",
            registry=r,
        )
        self.subscriptions_connected = Gauge(
            "chalie_subscriptions_connected", "Broadcast streams connected now.", registry=r
        )
        self.mcp_servers_up = Gauge(
            "chalie_mcp_servers_up", "Configured MCP servers connected with their tools listed.",
            registry=r,
        )
        self.mcp_calls = Counter(
            "chalie_mcp_tool_calls",
            "Tool calls to MCP servers, by server and result (ok, error: the tool reported an "
            "error, failed: no answer).", ["server", "result"], registry=r,
        )
        self.mcp_restarts = Counter(
            "chalie_mcp_restarts", "MCP server connections started again after a failure.",
            ["server"], registry=r,
        )
        # -- every path, and the background paths --
        self.path_llm_calls = Counter(
            "chalie_path_llm_calls",
            "LLM requests answered, by path (user, dmn, scheduled, goal, encoder).", ["path"],
            registry=r,
        )
        self.path_tokens = Counter(
            "chalie_path_tokens", "Tokens used (prompt and completion), by path.", ["path"],
            registry=r,
        )
        self.path_turns = Counter(
            "chalie_path_turns", "ACT loop runs finished, by path and outcome.",
            ["path", "outcome"], registry=r,
        )
        self.person_turns = Counter(
            "chalie_person_turns",
            "The person's turns through the post-turn fan-out, by mode (respond, clarify, act, "
            "acknowledge).", ["mode"], registry=r,
        )
        self.topics_started = Counter(
            "chalie_topics_started", "Topics started by the person's messages.", registry=r,
        )
        self.fan_out_failures = Counter(
            "chalie_fan_out_failures", "Post-turn fan-out steps that failed, by step.", ["step"],
            registry=r,
        )
        self.budget_tokens = Gauge(
            "chalie_budget_tokens_per_day",
            "The daily token budget of each background path (governor.*_tokens_per_day).",
            ["path"], registry=r,
        )
        self.budget_used = Gauge(
            "chalie_budget_tokens_used",
            "Tokens a background path used in the last 24 hours.", ["path"], registry=r,
        )
        self.store_write_failures = Counter(
            "chalie_store_write_failures",
            "Writes the store refused, by cause (full, read_only, damaged, io_error).", ["cause"],
            registry=r,
        )
        self.budget_paused = Gauge(
            "chalie_budget_paused",
            "1 while a background path is paused because it used its daily budget.", ["path"],
            registry=r,
        )
        self.budget_pauses = Counter(
            "chalie_budget_pauses",
            "Times a background path ran out of its daily budget and paused.", ["path"],
            registry=r,
        )
        self.proactive = Counter(
            "chalie_proactive_messages",
            "Proactive messages (DMN, goals, scheduled prompts), by path and result: sent, "
            "deferred (composed in quiet hours, queued), dropped (deferred too long).",
            ["path", "result"], registry=r,
        )
        self.proactive_suppressed = Counter(
            "chalie_proactive_suppressed",
            "Proactive messages not sent, or DMN triggers that made no call, by reason: "
            "quiet_hours (deferred), cap, no_action, nothing_new, budget.", ["reason"],
            registry=r,
        )
        self.dmn_triggers = Counter(
            "chalie_dmn_triggers", "DMN triggers, by trigger (idle, cadence, signal) and result "
            "(ran; or held for a conversation, merged into another trigger held with it, busy, "
            "budget, nothing_new).", ["trigger", "result"], registry=r,
        )
        self.schedule_runs = Counter(
            "chalie_schedule_runs",
            "Scheduled prompt runs, by outcome (done, failed, missed, paused).", ["outcome"],
            registry=r,
        )
        self.pruned_rows = Counter(
            "chalie_pruned_rows", "Rows deleted by retention, by kind (transcript, images, "
            "checkpoints, tool_calls, events, dmn_runs, auth_sessions, pairing_keys).", ["kind"],
            registry=r,
        )
        self.vacuum_pages = Counter(
            "chalie_vacuum_pages", "Free database pages returned to the file system.", registry=r
        )
        self.backups = Counter(
            "chalie_backups", "Scheduled backups, by outcome (ok, failed).", ["outcome"],
            registry=r,
        )
        self.db_bytes = Gauge(
            "chalie_db_bytes", "Size of the store on disk (database file and write-ahead log), "
            "as of the last housekeeping run.", registry=r,
        )
        self.api_calls = Counter(
            "chalie_api_calls",
            "Calls from programs with a scoped API token, by the token's name, protocol (mcp, "
            "openai) and result (ok, error, refused).", ["token", "protocol", "result"],
            registry=r,
        )
        self.rest_refused = Counter(
            "chalie_rest_refused",
            "REST requests refused before their handler ran, by reason (too_large, "
            "cross_site, rate_limited, bad_credentials).", ["reason"], registry=r,
        )
        self.sessions_rotated = Counter(
            "chalie_auth_sessions_rotated",
            "Login session cookies replaced by a new token (auth.rotate_days).", registry=r,
        )
        self.auth_locked_out = Counter(
            "chalie_auth_locked_out",
            "Login and pairing attempts refused (429) after too many failures, by what "
            "(login, pairing).", ["what"], registry=r,
        )

    def watch_store(self, describe: Callable[[], dict[str, Any]]) -> None:
        """The store's state, free space and held messages, read when scraped (describe is
        StoreHealth.describe)."""
        self.registry.register(_StoreCollector(describe))

    def watch_goals(self, counts: Callable[[], dict[str, int]]) -> None:
        """chalie_goals{state}: goals by state, read from the store when scraped."""
        self.registry.register(_GoalsCollector(counts))


class _GoalsCollector(Collector):
    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("chalie_goals", "Goals, by state.", labels=["state"])
        for state, n in sorted(self._counts().items()):
            family.add_metric([state], n)
        yield family



STORE_STATES = ("ok", "full", "read_only", "damaged", "io_error")  # chalie/store/health.py


class _StoreCollector(Collector):
    def __init__(self, describe: Callable[[], dict[str, Any]]) -> None:
        self._describe = describe

    def collect(self) -> Iterator[GaugeMetricFamily]:
        store = self._describe()
        state = GaugeMetricFamily("chalie_store_state",
                                  "1 for the store's state: ok, or why it cannot take writes "
                                  "(full, read_only, damaged, io_error).", labels=["state"])
        for name in STORE_STATES:
            state.add_metric([name], 1.0 if store["state"] == name else 0.0)
        yield state
        if store["free_bytes"] is not None:
            yield GaugeMetricFamily("chalie_store_free_bytes",
                                    "Free space on the file system holding the data directory.",
                                    value=store["free_bytes"])
        yield GaugeMetricFamily("chalie_messages_held",
                                "Messages kept in memory until the store takes writes again.",
                                value=store["held_messages"])
