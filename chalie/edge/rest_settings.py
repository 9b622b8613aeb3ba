"""/api/settings: the settings a person may change while the server runs (chalie/settings.py).

GET lists every settable key: its value (a secret's never: only whether it is `set`), the layer
it comes from (default, file, settings, environment), whether it takes effect `live` and whether
the environment `locked` it. PATCH takes a JSON object of dotted keys and their new values (null
removes a saved value: the key falls back to the config file or the default): 409 naming each
key the environment locks, 400 naming each key that is unknown, cannot be saved or has a bad
value, with the reason; nothing is saved or applied then. Otherwise the settings are saved to
<store.path>/settings.toml and what can change while running is applied at once; the answer
says which keys were `applied` and which wait for a restart (`restart_needed`: saved, not
applied half-way). Cookie only.

notify.urls (Apprise URLs: chalie/delivery/apprise_sender.py) is a secret shown masked: GET
gives each URL in its masked form. PATCH takes the whole list: an entry equal to the masked
form of a URL configured now keeps that URL (so the page adds and removes entries without ever
holding the others); any other entry must be a URL Apprise can use (a 400 naming the entry,
masked, otherwise).
"""

from __future__ import annotations

import copy
import importlib.util
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog

from chalie import settings
from chalie.config import Config
from chalie.config_load import load_config
from chalie.delivery import apprise_sender
from chalie.edge.api_spec import COOKIE_AUTH, Operation
from chalie.edge.context import EdgeContext
from chalie.edge.rest_base import ApiError, AuthedHandler
from chalie.errors import ChalieError, ConfigError

log = structlog.get_logger("chalie.edge")

Value = str | int | float | bool | list[str] | None
URLS = "notify.urls"  # a secret shown masked
Provider = Literal["openai", "anthropic", "llamacpp"]


class Setting(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    key: str
    value: Value  # null for a secret: see `set`
    source: Literal["default", "file", "settings", "environment"]
    live: bool  # takes effect while the server runs; otherwise after a restart
    locked: bool  # set by the environment (CHALIE_<SECTION>__<KEY>): PATCH answers 409
    secret: bool
    set: bool  # has a value (all a secret shows)
    pending: bool  # saved, but in effect only after a restart


class SettingsList(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    settings: list[Setting]
    # The providers this installation can run: openai (any OpenAI-compatible server) and
    # anthropic always; llamacpp (a GGUF in process) when the `local` extra is installed.
    providers: list[Provider]


def providers() -> list[Provider]:
    out: list[Provider] = ["openai", "anthropic"]
    if importlib.util.find_spec("xllamacpp") is not None:
        out.append("llamacpp")
    return out


class SettingsSaved(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    applied: list[str]  # in effect now
    restart_needed: list[str]  # saved; in effect after a restart
    settings: list[Setting]


class Check(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line of the model checks `chalie doctor` runs (chalie/doctor_models.py)."""

    level: Literal["ok", "warn", "FAIL"]
    what: str
    problem: str  # what is wrong and the setting to change; "" when ok


class Tested(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    ok: bool  # no check failed: saving these settings would give a working server
    checks: list[Check]
    models: list[str] | None  # what the primary model's server offers; null: it did not say


class TestHandler(AuthedHandler):
    """POST /api/settings/test: the model checks of `chalie doctor` (reachable, model served,
    a tool call round trip, structured output), live, for the settings as they would be with
    these changes (the same body as PATCH), without saving anything; and the list of models the
    primary model's server offers, for choosing one."""

    api = {"post": Operation(
        "Check the models the settings would have with these changes, saving nothing",
        {200: Tested}, auth=(COOKIE_AUTH,), body=dict[str, Value],
        example={"llm.base_url": "http://127.0.0.1:11434/v1", "llm.model": "llama3.1"})}

    async def post(self) -> None:
        changes = self.decode_body(dict[str, Value])
        bad = sorted(k for k in changes if k not in settings.SETTABLE or
                     not k.startswith("llm."))
        if bad:
            raise ApiError(400, "; ".join(f"{k}: not a model setting" for k in bad))
        saved = _saved(self.ctx)
        try:
            candidate = load_config(self.ctx.config_file, env=self.ctx.env,
                                    saved=_merged(saved, changes))
        except ConfigError as e:
            raise ApiError(400, f"{e.key}: {e.problem}") from None
        test = self.ctx.test_models
        if test is None:
            raise ApiError(503, "this server cannot test models")
        checks, models = await self.off_loop(lambda: test(candidate.llm))
        found = [msgspec.convert(c, Check) for c in checks]
        self.write_json(Tested(not any(c.level == "FAIL" for c in found), found, models))


class SettingsHandler(AuthedHandler):
    api = {
        "get": Operation("Every setting that can be changed here, with its value and source",
                         {200: SettingsList}, auth=(COOKIE_AUTH,)),
        "patch": Operation(
            "Change settings: saved to settings.toml, applied at once when they can be",
            {200: SettingsSaved}, auth=(COOKIE_AUTH,), body=dict[str, Value], errors=(409,),
            example={"dmn.daily_cap": 3, "tools.confirm": ["forget"]}),
    }

    def get(self) -> None:
        self.write_json(SettingsList(self._described(_saved(self.ctx)), providers()))

    def patch(self) -> None:
        changes = self.decode_body(dict[str, Value])
        saved = _saved(self.ctx)
        locked = sorted(k for k in changes if settings.env_name(k) in self.ctx.env)
        if locked:
            raise ApiError(409, "; ".join(
                f"{k}: set by the environment ({settings.env_name(k)}); change it there"
                for k in locked))
        problems = [f"{k}: cannot be changed here; set it in the config file"
                    for k in sorted(changes) if k not in settings.SETTABLE]
        entries = changes.get(URLS)
        if isinstance(entries, list):
            changes[URLS], bad = _unmasked(entries, self._configured(saved).notify.urls)
            problems += bad
        problems += [f"{k}: {p}" for k, p in self._bad_values(saved, changes)]
        new_saved = _merged(saved, changes)
        if not problems:
            try:
                new = load_config(self.ctx.config_file, env=self.ctx.env, saved=new_saved)
            except ConfigError as e:  # only together are they wrong
                problems.append(f"{e.key}: {e.problem}")
        if problems:
            raise ApiError(400, "; ".join(problems))
        path = settings.path_for(self.ctx.config)
        settings.write(path, new_saved)
        try:
            applied, restart = self.ctx.apply_config(new) if self.ctx.apply_config else ([], [])
        except ChalieError as e:  # a model that cannot be built (a provider's extra missing)
            settings.write(path, saved)
            raise ApiError(400, f"nothing was saved: {e}") from None
        log.info("settings_saved", keys=sorted(changes), applied=applied,
                 restart_needed=restart)
        self.write_json(SettingsSaved(applied, restart, self._described(new_saved)))

    # -- helpers --

    def _configured(self, saved: dict[str, Any]) -> Config:
        """The config as saved (what a restart would run with)."""
        try:
            return load_config(self.ctx.config_file, env=self.ctx.env, saved=saved)
        except ConfigError:  # the file changed under the server: show what runs
            return self.ctx.config

    def _described(self, saved: dict[str, Any]) -> list[Setting]:
        """Each setting as saved (what a restart would run with), and whether it waits;
        notify.urls masked."""
        configured = self._configured(saved)
        out = [msgspec.convert(d.as_json(), Setting) for d in settings.describe(
            configured, self.ctx.config, file=_file_layer(self.ctx.config_file), saved=saved,
            env=self.ctx.env)]
        shown = [apprise_sender.masked(u) for u in configured.notify.urls]
        return [msgspec.structs.replace(s, value=shown) if s.key == URLS else s for s in out]

    def _bad_values(self, saved: dict[str, Any],
                    changes: dict[str, Value]) -> list[tuple[str, str]]:
        """Each change that does not load on its own, with the reason (its key named)."""
        bad = []
        for key, value in sorted(changes.items()):
            if key not in settings.SETTABLE:
                continue
            try:
                load_config(self.ctx.config_file, env=self.ctx.env,
                            saved=_merged(saved, {key: value}))
            except ConfigError as e:
                bad.append((key, e.problem if e.key == key else f"{e.key}: {e.problem}"))
        return bad


def _unmasked(entries: list[str], configured: list[str]) -> tuple[list[str], list[str]]:
    """notify.urls as the page sent it, each masked entry back to the URL configured now that
    it shows (each configured URL taken once), each URL once; and the problems of the entries
    that are neither such a masked form nor a URL Apprise can use."""
    left = list(configured)
    urls: list[str] = []
    problems: list[str] = []
    for n, entry in enumerate(entries, start=1):
        found = next((u for u in left if entry in (u, apprise_sender.masked(u))), None)
        if found is not None:
            left.remove(found)
            url = found
        elif apprise_sender.parse(entry) is not None:
            url = entry
        else:
            problems.append(f"{URLS}: entry {n} ({apprise_sender.rough(entry)}) is not an "
                            "Apprise URL this server can use")
            continue
        if url not in urls:
            urls.append(url)
    return urls, problems


def _saved(ctx: EdgeContext) -> dict[str, Any]:
    """The saved settings; a 503 naming the file when it cannot be read."""
    try:
        return settings.read(settings.path_for(ctx.config))
    except ConfigError as e:
        raise ApiError(503, f"{e.key}: {e.problem}") from None


def _merged(saved: dict[str, Any], changes: dict[str, Value]) -> dict[str, Any]:
    """The saved settings with `changes` (settable keys only) made."""
    out = copy.deepcopy(saved)
    for key, value in changes.items():
        if key in settings.SETTABLE:
            settings.put(out, key, value)
    return out


def _file_layer(path: Path | None) -> dict[str, Any]:
    """The config file's own keys as it is now (what the `file` source means)."""
    if path is None:
        return {}
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}
