"""`chalie doctor`'s checks of the ways to reach the person away from the page: the VAPID key
pair of Web Push, the Apprise URLs, the Telegram bot's token (see chalie/doctor.py). Read-only,
as every check: nothing is made or written here."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Protocol

import apsw

from chalie.config import Config
from chalie.delivery import apprise_sender, telegram_sender, vapid
from chalie.doctor_models import Line
from chalie.errors import StoreError
from chalie.store import db, delivery_rows


class Reporter(Protocol):
    def line(self, line: Line) -> None: ...
    def ok(self, what: str) -> None: ...
    def warn(self, what: str, problem: str) -> None: ...
    def fail(self, what: str, problem: str) -> None: ...


def check(report: Reporter, config: Config) -> None:
    _push(report, config)
    _apprise(report, config)
    _telegram(report, config)


# --- Web Push ---------------------------------------------------------------------------------

def _push(report: Reporter, config: Config) -> None:
    """The VAPID key pair (chalie/delivery/vapid.py): the data directory's file is a P-256
    private key, or serve makes it (or writes it from the store's copy) on its next start.
    Read-only: the file is never made here."""
    what = "Web Push: VAPID keys readable"
    path = vapid.path_of(Path(config.store.path).absolute())
    stored = _stored_vapid_key(config)
    if not path.exists():
        if stored is not None:
            report.ok(f"{what} (in the store; serve writes {path} from it)")
        else:
            report.ok(f"{what} (none yet: serve makes them in {path} on its first start)")
        return
    try:
        keys = vapid.read_file(path, restorable=stored is not None)
    except StoreError as e:  # serve refuses to start with it
        report.fail(what, str(e))
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        report.warn(f"{what}: {path}", f"other users can read it (mode {mode:o}); chmod 600 "
                    "it (serve does on its next start)")
    elif stored is not None and stored != keys.public_key:
        report.warn(f"{what}: {path}", "it differs from the store's copy; serve keeps the "
                    "file's and replaces the store's (devices subscribed with the store's "
                    "key must enable notifications again)")
    else:
        report.ok(f"{what}: {path}")


def _stored_vapid_key(config: Config) -> str | None:
    """The public key of the store's copy of the pair, if there is a database that has one."""
    path = db.db_path(config.store.path)
    if not path.is_file():
        return None
    try:
        conn = db.connect(path, busy_timeout_ms=config.store.busy_timeout_ms, readonly=True)
        try:
            row = delivery_rows.vapid_key(conn)
        finally:
            conn.close()
    except (StoreError, apsw.Error):  # unreadable (the SQLite check says so), or no table yet
        return None
    return None if row is None else row.public_key


def _apprise(report: Reporter, config: Config) -> None:
    """Each of notify.urls is a URL Apprise can use (shown masked: they hold secrets)."""
    urls = config.notify.urls
    if not urls:
        report.ok("Apprise: no notification URLs configured (notify.urls)")
        return
    bad = [(n, u) for n, u in enumerate(urls) if apprise_sender.parse(u) is None]
    for n, url in bad:
        report.warn(f"Apprise: notify.urls[{n}] {apprise_sender.rough(url)}",
                    "not a URL Apprise can use (https://github.com/caronc/apprise/wiki); fix or "
                    "remove it in notify.urls (nothing is sent to it)")
    if not bad:
        services = sorted({p.service for u in urls if (p := apprise_sender.parse(u))})
        report.ok(f"Apprise: {len(urls)} URL{'' if len(urls) == 1 else 's'} "
                  f"parse{'s' if len(urls) == 1 else ''} ({', '.join(services)})")


# --- Telegram ---------------------------------------------------------------------------------

def _telegram(report: Reporter, config: Config) -> None:
    """The bot's token, as the Bot API at telegram.base_url takes it (getMe); no line while no
    token is set."""
    if config.telegram.token:
        report.line(Line(*telegram_sender.check_token(config)))
