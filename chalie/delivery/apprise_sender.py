"""The notification services people already run, through Apprise: each URL of notify.urls
(ntfy://, tgram://, mailto://, matrix://, discord://, slack://, gotify://, pover://, json://
and the rest Apprise knows) is one target, "apprise:<sha256 of the URL, 16 hex digits>", that
takes the kinds in notify.kinds.

The URLs hold secrets (tokens, passwords, webhook keys). What is shown of a URL is its masked
form (`masked`): Apprise's own privacy form (`url(privacy=True)`), with only the query
parameters the person wrote, and header and pass-through values (`+name=`, `-name=`) hidden
too. Whatever a failure says is cleaned of every piece of the URL the masked form hides
(`hide`). Apprise's own log lines never reach Chalie's logs (its logger does not propagate:
it is read only for the words of a failure, through Apprise's per-call capture), nor do the
request lines of the HTTP library under it (urllib3 at WARNING: a Telegram or Discord URL
puts its token in the request's path).

Apprise is one-way: an escalation sent through it says it waits for an answer in the page.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import structlog

from chalie.config import Config
from chalie.delivery.items import Item
from chalie.delivery.senders import Sent, Target

NAME = "apprise"
PREFIX = "apprise:"
HIDDEN = "****"
MAX_ERROR = 300  # characters of a failure's words kept
WAITS = "It waits for your answer in Chalie's page."
TEST_TITLE = "Chalie: a test"
TEST_BODY = "Chalie's notifications reach you here."
_MIN_SECRET = 4  # characters: shorter pieces of a URL are not worth hiding (and would hide
# pieces of ordinary words)
_SPLIT = re.compile(r"[/:@?&=#,;+\s]+")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,30})://")
_SECRET_PARAM = re.compile(r"token|key|pass|secret|auth|sig|webhook|hash", re.IGNORECASE)
_FAILED_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})

if TYPE_CHECKING:
    import apprise

log = structlog.get_logger("chalie.delivery")


@lru_cache(maxsize=1)
def _lib() -> ModuleType:
    """Apprise, imported on first use (about 0.2 s of start-up, and a server without
    notify.urls never needs it), quieted before anything of it runs."""
    import apprise as lib  # noqa: PLC0415

    _keep_apprise_quiet(lib)
    return lib


def _keep_apprise_quiet(lib: ModuleType) -> None:
    """Apprise's records stay with Apprise: its logger does not propagate to Chalie's handlers
    (its per-call capture, on that logger, still reads a failure's words), at WARNING so that
    its debug lines (payloads, request addresses) are never even formatted. urllib3 (under
    requests, under Apprise) logs each request's path at DEBUG, a bot token's place."""
    quiet = logging.getLogger(lib.LOGGER_NAME)
    quiet.propagate = False
    quiet.setLevel(logging.WARNING)
    lower = logging.getLogger("urllib3")
    if lower.getEffectiveLevel() < logging.WARNING:
        lower.setLevel(logging.WARNING)
    # Apprise's PGP helper (loaded with its plugins) imports the standard library's imghdr for
    # PGPy, which warns that it is deprecated (Python 3.11, 3.12): loaded here once, quietly,
    # so that no later parse or send warns.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="'imghdr' is deprecated",
                                category=DeprecationWarning)
        importlib.import_module("apprise.utils.pgp")



@dataclass(frozen=True)
class Parsed:
    """A URL Apprise can use: its target `key`, its `service` (the schema Apprise knows it by:
    json, ntfy, tgram, mailto...), its `masked` form and the `secrets`: the pieces of it the
    masked form hides, longest first."""

    url: str
    key: str
    service: str
    masked: str
    secrets: tuple[str, ...]


def key_of(url: str) -> str:
    return PREFIX + hashlib.sha256(url.encode()).hexdigest()[:16]


def _asset() -> apprise.AppriseAsset:
    """Apprise's settings for Chalie: its name on what it sends, nothing kept on disk."""
    asset: apprise.AppriseAsset = _lib().AppriseAsset(
        app_id="Chalie", app_desc="Chalie", storage_mode="memory", secure_logging=True)
    return asset


def _plugin(url: str) -> Any:
    """Apprise's service object for `url`, or None when it cannot use it (its reasons go to
    its own logger, which keeps them)."""
    try:
        return _lib().Apprise.instantiate(url, asset=_asset())
    except Exception:  # an unusual URL can trip a plugin's parser: unusable all the same
        return None


@lru_cache(maxsize=256)
def parse(url: str) -> Parsed | None:
    """What Apprise makes of `url`; None when it cannot use it."""
    plugin = _plugin(url)
    if plugin is None:
        return None
    protocols = [p for attr in ("protocol", "secure_protocol")
                 for p in _names(getattr(plugin, attr, None))]
    service = protocols[0].lower() if protocols else type(plugin).__name__.lower()
    shown = _trimmed(str(plugin.url(privacy=True)), url)
    return Parsed(url, key_of(url), service, shown, _secrets(url, shown, protocols))


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list | tuple | set | frozenset):
        return sorted(str(v) for v in value if v)
    return []


def _trimmed(private: str, url: str) -> str:
    """The privacy form with only the query parameters `url` itself has (Apprise adds every
    default), and the values of headers, pass-through and secret-looking parameters hidden."""
    parts = urlsplit(private)
    wrote = {name for name, _ in _query(urlsplit(url).query)}
    kept = []
    for name, value in _query(parts.query):
        if name not in wrote:
            continue
        secret = name[:1] in "+-" or _SECRET_PARAM.search(name)
        kept.append(f"{quote(name, safe=':+-')}={HIDDEN if secret and value else quote(value)}")
    return urlunsplit(parts._replace(query="&".join(kept)))


def _query(query: str) -> list[tuple[str, str]]:
    """A URL's query as (name, value) pairs, unquoted; "+" stays "+" (Apprise's header
    parameters begin with it)."""
    pairs = (part.partition("=") for part in query.split("&") if part)
    return [(unquote(name), unquote(value)) for name, _, value in pairs]


def _pieces(text: str) -> set[str]:
    out: set[str] = set()
    for form in (text, unquote(text), unquote(unquote(text))):
        out.update(p for p in _SPLIT.split(form) if p)
    return out


def _secrets(url: str, shown: str, protocols: Iterable[str] = ()) -> tuple[str, ...]:
    """The pieces of `url` (between its / : @ ? & = # , ; + and spaces, raw and unquoted) that
    its masked form `shown` does not show (nor its service's schemas), and the URL itself;
    longest first."""
    hidden = {p for p in _pieces(url) - _pieces(shown) - set(protocols)
              if len(p) >= _MIN_SECRET}
    return tuple(sorted(hidden | {url}, key=len, reverse=True))


def rough(url: str) -> str:
    """What is shown of a URL Apprise cannot use: its scheme, if it has one, and no more."""
    found = _SCHEME.match(url.strip())
    return f"{found.group(1)}://…" if found else "…"


def masked(url: str) -> str:
    """What the person, the logs and the API see of `url`."""
    parsed = parse(url)
    return parsed.masked if parsed is not None else rough(url)


def hide(text: str, urls: Iterable[str]) -> str:
    """`text` with every URL of `urls` masked and every secret piece of them hidden."""
    secrets: list[str] = []
    for url in urls:
        parsed = parse(url)
        if parsed is None:
            text = text.replace(url, rough(url))
            secrets += [p for p in _pieces(url) if len(p) >= _MIN_SECRET]
        else:
            text = text.replace(url, parsed.masked)
            secrets += parsed.secrets
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return text


def notify(url: str, title: str, body: str, *, timeout_s: float,
           warning: bool = False) -> Sent:
    """Send one message to `url` through Apprise, waiting at most about `timeout_s` (its
    connect and read timeouts, and the whole call's); never raises. A failure's `error` is
    what Apprise said of it, every secret of the URL hidden."""
    parsed = parse(url)
    if parsed is None:
        return Sent("failed", f"{rough(url)} is not an Apprise URL this server can use")
    try:
        plugin = _plugin(url)
        if plugin is None:
            return Sent("failed", f"{parsed.masked} cannot be used now")
        plugin.socket_connect_timeout = timeout_s
        plugin.socket_read_timeout = timeout_s
        lib = _lib()
        sender = lib.Apprise(asset=_asset())
        sender.add(plugin)
        kind = lib.NotifyType.WARNING if warning else lib.NotifyType.INFO
        with sender.notify(body=body, title=title, notify_type=kind,
                           body_format=lib.NotifyFormat.TEXT, timeout=timeout_s) as result:
            if result:
                return Sent("sent")
            said = [e.message for e in result.logs() if e.level in _FAILED_LEVELS]
            status = result.status.name.lower()
    except Exception as e:  # Apprise's or a plugin's bug: a failed send all the same
        return Sent("failed", _cut(hide(f"{type(e).__name__}: {e}", [url])))
    words = "; ".join(dict.fromkeys(said)) or f"{parsed.service} did not take it ({status})"
    if status == "timeout":
        words = f"no answer within {timeout_s:g}s; {words}"
    return Sent("failed", _cut(hide(words, [url])))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ERROR else text[:MAX_ERROR - 1].rstrip() + "…"


def body_of(item: Item) -> str:
    """What a service shows under the title: an escalation waiting for an answer says where
    to give it (Apprise carries nothing back)."""
    return f"{item.body}\n\n{WAITS}" if item.actions else item.body


class AppriseSender:
    """The Sender of the Apprise URLs (chalie/delivery/senders.py). `config` returns the config
    in effect, read on every call: a saved notify.urls or notify.kinds applies from the next
    delivery on."""

    name = NAME

    def __init__(self, config: Callable[[], Config]) -> None:
        self._config = config
        self._warned: set[str] = set()  # keys of the URLs already logged as unusable

    def targets(self) -> list[Target]:
        notify = self._config().notify
        kinds = frozenset(notify.kinds)
        out: dict[str, Target] = {}
        for n, url in enumerate(notify.urls):
            parsed = parse(url)
            if parsed is None:
                key = key_of(url)
                if key not in self._warned:
                    self._warned.add(key)
                    log.warning("apprise_url_skipped", url=rough(url), index=n,
                                problem="not an Apprise URL this server can use; fix or "
                                        "remove it in notify.urls")
                continue
            out.setdefault(parsed.key, Target(parsed.key, parsed.service, parsed.masked, kinds))
        return list(out.values())

    def url_of(self, key: str) -> str | None:
        """The configured URL whose target key is `key`."""
        return next((u for u in self._config().notify.urls if key_of(u) == key), None)

    def send(self, target: Target, item: Item) -> Sent:
        url = self.url_of(target.key)
        if url is None:
            return Sent("gone", "no longer in notify.urls")
        return notify(url, item.title, body_of(item),
                      timeout_s=self._config().notify.timeout_s,
                      warning=item.kind == "escalations")
