"""What a SIGHUP reload changes: the keys it applies and the ones it leaves for a restart
(chalie/reload.py), and the shared parts that take new values while running."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

from chalie.background.attention import Attention, QuietHours
from chalie.background.governor import Governor
from chalie.clock import ManualClock
from chalie.config import Config, parse_span
from chalie.llm.scripted import ScriptedProvider
from chalie.metrics import Metrics
from chalie.reload import RELOADABLE, changes, merged
from chalie.server import Server
from chalie.tools.catalog import ToolCatalog
from tests.tools.test_registry import FakeTool

MakeConfig = Callable[..., Config]
BUDGETS = {"dmn": 1000, "scheduled": 2000, "goal": 3000, "encoder": 4000}


def test_the_same_config_changes_nothing(make_config: MakeConfig) -> None:
    """Reloading an unchanged file applies nothing and asks for no restart."""
    config = make_config()
    assert changes(config, make_config()) == ([], [])


def test_live_keys_are_applied_and_the_rest_need_a_restart(make_config: MakeConfig) -> None:
    """Each changed key is named once, as applied or as waiting for a restart, sorted."""
    old = make_config()
    new = make_config(
        log={"level": "debug"}, governor={"goal_tokens_per_day": 9},
        tools={"block": ["forget"]}, server={"port": 9999}, store={"synchronous": "NORMAL"},
        act={"workers": 3},
    )
    assert changes(old, new) == (
        ["governor.goal_tokens_per_day", "log.level", "tools.block"],
        ["act.workers", "server.port", "store.synchronous"],
    )


def test_a_model_change_applies_by_its_full_key_and_the_embedder_waits(
    make_config: MakeConfig,
) -> None:
    """A job's own model ([llm.primary]) is applied while running, named by the key the
    person changed, and only that key is taken; the embedder needs a restart; a job's context
    window too (the prompt's budget is set at start)."""
    old = make_config()
    new = make_config(llm={"primary": {"model": "bigger", "context_window": 4096}},
                      memory={"embedder": "openai"})
    applied, restart = changes(old, new)
    assert (applied, restart) == (["llm.primary.model"],
                                  ["llm.primary.context_window", "memory.embedder"])
    effective = merged(old, new, applied)
    primary = effective.llm.job("primary")
    assert primary is not None
    assert (primary.model, primary.context_window) == ("bigger", old.llm.context_window)


def test_merged_takes_only_the_applied_keys(make_config: MakeConfig) -> None:
    """The config in effect after a reload has the new live values and the old rest."""
    old = make_config()
    new = make_config(dmn={"daily_cap": 1, "quiet_hours": "22:00-07:00"},
                      server={"port": 9999})
    applied, _ = changes(old, new)
    effective = merged(old, new, applied)
    assert (effective.dmn.daily_cap, effective.dmn.quiet_hours) == (1, "22:00-07:00")
    assert effective.server.port == old.server.port
    assert changes(effective, new) == ([], ["server.port"])  # still waiting for a restart


def test_every_reloadable_key_is_a_config_key(make_config: MakeConfig) -> None:
    """A misspelt key in RELOADABLE would never be applied: each names a real setting."""
    config = make_config(llm={"primary": {"fallback": {"model": "small"}},
                              "light": {"fallback": {"model": "small"}}})
    for key in RELOADABLE:
        *tables, name = key.split(".")
        node = config
        for table in tables:
            node = getattr(node, table)
        assert name in node.__struct_fields__, key


def test_new_budgets_govern_at_once_and_keep_what_was_spent() -> None:
    """A raised budget gives a paused path room again; a budget set to 0 stops it."""
    clock, metrics = ManualClock(wall=1_000_000.0), Metrics()
    governor = Governor(BUDGETS, clock, metrics)
    governor.charge("dmn", 1500)
    assert not governor.has_room("dmn")
    governor.set_budgets({**BUDGETS, "dmn": 2000, "goal": 0})
    assert governor.has_room("dmn")
    assert governor.used("dmn") == 1500
    assert not governor.has_room("goal")
    assert governor.report()["goal"]["tokens_per_day"] == 0
    assert metrics.registry.get_sample_value("chalie_budget_paused",
                                             {"path": "goal"}) == 1


def test_new_quiet_hours_and_cap_decide_the_next_message() -> None:
    """Quiet hours set by a reload defer the next message; a lower cap suppresses it."""
    clock = ManualClock(wall=12 * 3600.0)  # noon UTC
    attention = Attention(QuietHours(None, ZoneInfo("UTC")), daily_cap=5, clock=clock)
    assert attention.decide(capped=True) == ("sent", None)
    attention.retune(parse_span("11:00-13:00"), daily_cap=5)
    assert attention.decide(capped=True) == ("deferred", "quiet_hours")
    attention.retune(None, daily_cap=2)
    assert attention.decide(capped=True) == ("suppressed", "cap")


def test_new_confirm_and_block_lists_rule_the_next_call() -> None:
    """A tool named in tools.block on reload is no longer offered; one named in confirm asks."""
    catalog = ToolCatalog([FakeTool("clock"), FakeTool("mail")])
    assert (catalog.danger("clock"), catalog.danger("mail")) == ("safe", "safe")
    catalog.set_rules(confirm=["mail"], block=["clock"])
    assert (catalog.danger("clock"), catalog.danger("mail")) == ("block", "confirm")
    assert [spec.name for spec in catalog.specs()] == ["mail"]


def test_the_server_keeps_the_config_in_effect_and_the_housekeeper_reads_it(
    make_config: MakeConfig,
) -> None:
    """Server.reload returns what it applied and what waits; its config (which the
    housekeeper reads on each run) has the new retention and the old store path."""
    old = make_config()
    server = Server(old, provider=ScriptedProvider([]))
    new = make_config(store={"backups_kept": 7, "transcript_days": 30.0,
                             "path": str(Path(old.store.path) / "elsewhere")})
    assert server.reload(new) == (["store.backups_kept", "store.transcript_days"],
                                  ["store.path"])
    assert (server.config.store.backups_kept, server.config.store.transcript_days) == (7, 30.0)
    assert server.config.store.path == old.store.path
