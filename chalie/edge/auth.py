"""Password and login sessions.

The password is `auth.password` when set; otherwise one is made at first start, printed once,
and only its scrypt hash is kept (table auth_password; `chalie passwd` replaces it). A login gives
a random session token in an HttpOnly cookie; the store keeps only the token's SHA-256.

A session lasts `auth.session_days` from its login. Once its token is `auth.rotate_days` old it
is replaced by a new one (chalie/edge/session_cookie.py) that keeps the login's expiry; the old
token then works for `ROTATE_GRACE_S` more, for requests already on their way.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass

import apsw

from chalie.clock import Clock
from chalie.store import db

COOKIE = "chalie_session"
LIVE_CHECK_CHUNK = 500  # token hashes per query (SQLite's bound-parameter limit is higher)
ROTATE_GRACE_S = 60.0  # a rotated token's remaining life
MIN_PASSWORD_CHARS = 8  # for `chalie passwd`; a configured auth.password is the person's call
_N, _R, _P = 2**14, 8, 1


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=32)
    b64 = base64.b64encode
    return f"scrypt${_N}${_R}${_P}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        got = hashlib.scrypt(
            password.encode(), salt=base64.b64decode(salt, validate=True), n=int(n), r=int(r),
            p=int(p), dklen=32,
        )
        return hmac.compare_digest(got, base64.b64decode(digest, validate=True))
    except (ValueError, binascii.Error):  # a damaged hash refuses every password
        return False


def ensure_password(conn: apsw.Connection, configured: str, clock: Clock) -> str | None:
    """Make and store a password when none is configured or stored; return it to print once."""
    if configured:
        return None
    if conn.execute("SELECT 1 FROM auth_password WHERE id = 1").fetchone():
        return None
    password = secrets.token_urlsafe(18)
    with db.immediate(conn):
        conn.execute(
            "INSERT INTO auth_password (id, password_hash, created_at) VALUES (1, ?, ?)",
            (hash_password(password), clock.time()),
        )
    return password


def set_password(conn: apsw.Connection, password: str, clock: Clock) -> int:
    """Store `password`'s hash and end every login session, in one transaction; returns how
    many sessions ended. Safe while the server runs: it reads sessions from the store."""
    with db.immediate(conn):
        conn.execute(
            "INSERT INTO auth_password (id, password_hash, created_at) VALUES (1, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET password_hash = excluded.password_hash, "
            "created_at = excluded.created_at",
            (hash_password(password), clock.time()),
        )
        conn.execute("DELETE FROM auth_sessions")
        return conn.changes()


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class SessionState:
    """A live login session: when its token was made and when the session ends."""

    created_at: float
    expires_at: float

    def due_for_rotation(self, now: float, rotate_days: float) -> bool:
        """Old enough to be replaced, and not already replaced (a replaced token has at most
        ROTATE_GRACE_S left, as has a session about to end, which is not worth replacing)."""
        return (now - self.created_at >= rotate_days * 86400
                and self.expires_at - now > ROTATE_GRACE_S)


class Authenticator:
    """Checks passwords and session tokens. Reads only; new sessions are written by the caller."""

    def __init__(self, *, configured: str, read: Callable[[], apsw.Connection], clock: Clock):
        self._configured = configured
        self._read = read
        self._clock = clock

    def password_ok(self, password: str) -> bool:
        """Slow on purpose (scrypt): call it off the IOLoop."""
        if self._configured:
            return hmac.compare_digest(password.encode(), self._configured.encode())
        row = self._read().execute(
            "SELECT password_hash FROM auth_password WHERE id = 1"
        ).fetchone()
        return row is not None and verify_password(password, str(row[0]))

    def session(self, token: str | None) -> SessionState | None:
        """The token's session while it lasts; None for a missing, unknown or expired one."""
        if not token:
            return None
        row = self._read().execute(
            "SELECT created_at, expires_at FROM auth_sessions WHERE token_hash = ?",
            (token_hash(token),),
        ).fetchone()
        if row is None or float(row[1]) <= self._clock.time():
            return None
        return SessionState(float(row[0]), float(row[1]))

    def session_ok(self, token: str | None) -> bool:
        return self.session(token) is not None

    def live_sessions(self, hashes: Collection[str]) -> set[str]:
        """Those of the token hashes `hashes` whose session is still live (open sockets'
        logins, checked at each keepalive beat)."""
        wanted, now = list(hashes), self._clock.time()
        alive: set[str] = set()
        for start in range(0, len(wanted), LIVE_CHECK_CHUNK):
            chunk = wanted[start:start + LIVE_CHECK_CHUNK]
            alive.update(str(row[0]) for row in self._read().execute(
                "SELECT token_hash FROM auth_sessions WHERE expires_at > ? AND token_hash IN "
                f"({', '.join('?' * len(chunk))})", (now, *chunk)))
        return alive

    @staticmethod
    def new_token() -> str:
        return secrets.token_urlsafe(32)


class LoginThrottle:
    """Refuses logins from an address that got the password wrong `max_failures` times within
    `window_s`, until the oldest of those failures is `window_s` old. Keeps at most
    `max_addresses` addresses, dropping the least recently failed."""

    def __init__(self, clock: Clock, *, max_failures: int, window_s: float,
                 max_addresses: int = 10_000) -> None:
        self._clock = clock
        self._max = max_failures
        self._window = window_s
        self._max_addresses = max_addresses
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, address: str) -> float | None:
        """Seconds until `address` may try again, or None when it may try now."""
        recent = self._recent(address)
        if len(recent) < self._max:
            return None
        return recent[0] + self._window - self._clock.monotonic()

    def failed(self, address: str) -> None:
        recent = self._recent(address)
        recent.append(self._clock.monotonic())
        self._failures.pop(address, None)
        self._failures[address] = recent  # most recently failed last
        while len(self._failures) > self._max_addresses:
            del self._failures[next(iter(self._failures))]

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)

    def _recent(self, address: str) -> deque[float]:
        recent = self._failures.get(address, deque())
        now = self._clock.monotonic()
        while recent and now - recent[0] >= self._window:
            recent.popleft()
        return recent
