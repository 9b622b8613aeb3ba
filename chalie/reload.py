"""What a SIGHUP can change while the server runs, and what waits for a restart.

`chalie serve` reads its config file and environment again on SIGHUP and compares the new
config with the one in effect, key by key. A key is reloadable only when every part that uses
it reads it again after the reload:
- the edge reads `EdgeContext.config` on each request, and the Server swaps that config;
- the governor's budgets, Attention's quiet hours and daily cap, and the tool catalog's
  confirm/block lists are set anew on the objects every path shares;
- the housekeeper reads [store]'s retention and backup keys from `Server.config` on each run;
- the Delivery actor and its senders read [notify] and [push] from `Server.config` at each
  delivery, and the Telegram bot is started again when its token changes;
- each job's model and fallback (provider, address, API key, model) are built again by
  Server.reload, and each job answers with them from its next call on;
- the log level and format are set again by `chalie serve` (chalie/cli.py).
Every other changed key (the address, the store file, a model's other settings, the embedder,
MCP servers, the worker pool, values actors copied at start...) keeps its old value until a
restart, and is reported as such. `Server.config` is always the config in effect: the old one
with only the reloadable changes taken (`merged`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from chalie.config import Config

RELOADABLE = frozenset({
    "log.level", "log.format",
    # The edge: read from ctx.config on each request (Tornado's own body cut-off, above every
    # endpoint's limit, is set again too).
    "auth.session_days", "auth.rotate_days", "auth.secure_cookie", "server.metrics_token",
    "server.rest_rate_per_min", "server.max_body_bytes", "images.max_bytes",
    "interfaces.pairing_key_ttl_s", "interfaces.notify_channel", "openai.repeat_window_s",
    # The housekeeper: read at the start of each run (a new interval after the next run).
    "store.transcript_days", "store.tool_calls_days", "store.events_days",
    "store.prune_interval_s", "store.prune_batch", "store.vacuum_pages", "store.backups_kept",
    "store.backup_dir",
    # Shared policy objects, set again by Server.reload.
    "governor.dmn_tokens_per_day", "governor.scheduled_tokens_per_day",
    "governor.goal_tokens_per_day", "governor.encoder_tokens_per_day",
    "dmn.daily_cap", "dmn.quiet_hours",
    "tools.confirm", "tools.block",
    # Each job's model, and its fallback: Server.reload builds the models again and each job
    # answers with them from its next call on (a turn finishes with the models it began with).
    *(f"{table}.{key}" for table in ("llm", "llm.primary", "llm.light", "llm.primary.fallback",
                                     "llm.light.fallback")
      for key in ("provider", "base_url", "api_key", "model")),
    "llm.primary.fallback", "llm.light.fallback",  # a fallback added or removed whole
    # Delivery away from the page: the senders and the Delivery actor read [notify] and [push]
    # from Server.config at each delivery; the Telegram bot starts again with a new token.
    "notify.urls", "notify.kinds", "notify.skip_when_visible", "notify.retry_initial_s",
    "notify.retry_max_s", "notify.give_up_s", "notify.timeout_s", "notify.log_days",
    "push.subject", "push.ttl_s", "telegram.token", "telegram.edit_every_s",
    "telegram.pairing_code_ttl_s",
})
MODEL_KEYS = frozenset(k for k in RELOADABLE if k.startswith("llm."))


def changes(old: Config, new: Config) -> tuple[list[str], list[str]]:
    """The dotted keys whose value differs between `old` and `new`: (the ones a reload
    applies, the ones that need a restart), each sorted."""
    changed = sorted(_diff("", old, new))
    return ([k for k in changed if k in RELOADABLE],
            [k for k in changed if k not in RELOADABLE])


def merged(old: Config, new: Config, keys: Iterable[str]) -> Config:
    """`old` with the values of `keys` (dotted, as in RELOADABLE: section.key, or a job's
    table's key, llm.primary.model) taken from `new`."""
    out = old
    for key in keys:
        parts = key.split(".")
        value: Any = new
        for part in parts:
            value = getattr(value, part)
        out = _with(out, parts, value)
    return out


def _with(struct: Any, parts: list[str], value: Any) -> Any:
    """A copy of `struct` with the value at the dotted path `parts` replaced."""
    head, *rest = parts
    if rest:
        value = _with(getattr(struct, head), rest, value)
    return msgspec.structs.replace(struct, **{head: value})


def _diff(prefix: str, old: Any, new: Any) -> Iterator[str]:
    """Dotted names of what differs; tables ([llm.primary]) are compared key by key, lists
    (mcp.servers) as a whole."""
    if isinstance(old, msgspec.Struct) and type(old) is type(new):
        for name in old.__struct_fields__:
            yield from _diff(f"{prefix}.{name}" if prefix else name,
                             getattr(old, name), getattr(new, name))
    elif old != new:
        yield prefix
