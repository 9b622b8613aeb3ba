"""Passwords and login sessions, as a person logging in would experience them."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import apsw
import pytest

from chalie.cli_auth import PASSWORD_ENV, PasswordRefused, configured_in, read_new_password
from chalie.clock import ManualClock
from chalie.edge.auth import (
    ROTATE_GRACE_S,
    Authenticator,
    LoginThrottle,
    SessionState,
    ensure_password,
    hash_password,
    set_password,
    token_hash,
    verify_password,
)
from chalie.store import auth_rows, db


@pytest.fixture
def conn(tmp_path: Path) -> apsw.Connection:
    return db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=100.0, wall=1_700_000_000.0)


def test_password_verifies_against_its_own_hash_only() -> None:
    """The right password matches its stored hash; a wrong or empty one does not."""
    stored = hash_password("correct horse")
    assert stored.startswith("scrypt$16384$8$1$")
    assert verify_password("correct horse", stored) is True
    assert verify_password("correct horse ", stored) is False
    assert verify_password("", stored) is False


def test_same_password_hashes_differently_with_different_salts() -> None:
    """Two hashes of one password differ (random salt) and both verify; a fixed salt repeats."""
    one, two = hash_password("pw"), hash_password("pw")
    assert one != two
    assert verify_password("pw", one) is True
    assert verify_password("pw", two) is True
    assert hash_password("pw", salt=b"0" * 16) == hash_password("pw", salt=b"0" * 16)


def test_malformed_stored_hash_is_rejected() -> None:
    """A stored value that is not one of our hashes never lets a password in."""
    assert verify_password("pw", "plain-text-password") is False
    assert verify_password("pw", "bcrypt$1$2$3$c2FsdA==$ZGlnZXN0") is False


def test_corrupt_scrypt_hash_is_rejected_rather_than_raising() -> None:
    """A damaged scrypt hash in the store refuses the login instead of failing the request."""
    assert verify_password("pw", "scrypt$16384$8$1$c2FsdA==$abc") is False


def test_first_start_makes_a_password_once(conn: apsw.Connection, clock: ManualClock) -> None:
    """With no password configured, the first start makes one; later starts keep it."""
    password = ensure_password(conn, "", clock)
    assert isinstance(password, str)
    assert len(password) == 24
    assert ensure_password(conn, "", clock) is None
    rows = conn.execute("SELECT id, password_hash, created_at FROM auth_password").fetchall()
    assert [(r[0], r[2]) for r in rows] == [(1, 1_700_000_000.0)]
    assert verify_password(password, rows[0][1]) is True
    auth = Authenticator(configured="", read=lambda: conn, clock=clock)
    assert auth.password_ok(password) is True
    assert auth.password_ok("guess") is False


def test_configured_password_is_used_and_none_is_made(
    conn: apsw.Connection, clock: ManualClock,
) -> None:
    """A configured password is the one that logs in; nothing is generated or stored."""
    assert ensure_password(conn, "s3cret", clock) is None
    assert conn.execute("SELECT count(*) FROM auth_password").fetchall() == [(0,)]
    auth = Authenticator(configured="s3cret", read=lambda: conn, clock=clock)
    assert auth.password_ok("s3cret") is True
    assert auth.password_ok("s3cret!") is False


def test_session_token_is_valid_until_it_expires(conn: apsw.Connection, clock: ManualClock) -> None:
    """A stored session token logs in until its expiry; unknown and missing tokens never do."""
    now = clock.time()
    conn.execute(
        "INSERT INTO auth_sessions (token_hash, created_at, expires_at) VALUES (?, ?, ?)",
        (token_hash("good-token"), now, now + 60.0),
    )
    auth = Authenticator(configured="", read=lambda: conn, clock=clock)
    assert auth.session_ok("good-token") is True
    assert auth.session_ok("other-token") is False
    assert auth.session_ok("") is False
    assert auth.session_ok(None) is False
    clock.advance(59.0)
    assert auth.session_ok("good-token") is True
    clock.advance(1.0)
    assert auth.session_ok("good-token") is False


def test_new_tokens_are_random_and_stored_only_as_a_hash() -> None:
    """Each login gets a fresh token; the store keeps its SHA-256, never the token itself."""
    one, two = Authenticator.new_token(), Authenticator.new_token()
    assert one != two
    assert len(one) == 43
    assert token_hash(one) == hashlib.sha256(one.encode()).hexdigest()
    assert token_hash(one) != one


def test_login_throttle_locks_an_address_out_after_too_many_failures() -> None:
    """The third wrong password within the window locks that address out, others stay free."""
    clock = ManualClock()
    throttle = LoginThrottle(clock, max_failures=3, window_s=60)
    for _ in range(2):
        throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") is None
    clock.advance(10)
    throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 50  # the first failure is 10 s old
    assert throttle.retry_after("10.0.0.2") is None
    clock.advance(50)
    assert throttle.retry_after("10.0.0.1") is None  # the first failure left the window


def test_a_successful_login_clears_an_address_and_memory_is_bounded() -> None:
    """Success forgets the failures; past max_addresses the least recently failed is dropped."""
    clock = ManualClock()
    throttle = LoginThrottle(clock, max_failures=1, window_s=60, max_addresses=2)
    throttle.failed("a")
    assert throttle.retry_after("a") == 60
    throttle.succeeded("a")
    assert throttle.retry_after("a") is None
    for address in ("a", "b", "c"):
        throttle.failed(address)
    assert [throttle.retry_after(x) for x in ("a", "b", "c")] == [None, 60, 60]


DAY = 86400.0


def login(conn: apsw.Connection, token: str, created_at: float, days: float = 30) -> None:
    with db.immediate(conn):
        auth_rows.create_session(conn, token_hash(token), created_at=created_at,
                                 expires_at=created_at + days * DAY)


def test_a_session_reports_when_it_was_made_and_when_it_ends(
    conn: apsw.Connection, clock: ManualClock,
) -> None:
    """A live token's session carries its creation and expiry; an expired one is None."""
    now = clock.time()
    login(conn, "tok", now, days=1)
    auth = Authenticator(configured="", read=lambda: conn, clock=clock)
    assert auth.session("tok") == SessionState(now, now + DAY)
    clock.advance(DAY)
    assert auth.session("tok") is None
    assert auth.session_ok("tok") is False


def test_a_session_is_due_for_rotation_once_its_token_is_rotate_days_old() -> None:
    """Younger than rotate_days: kept; older: replaced, unless it has a minute or less left."""
    state = SessionState(created_at=0.0, expires_at=30 * DAY)
    assert state.due_for_rotation(DAY - 1, rotate_days=1) is False
    assert state.due_for_rotation(DAY, rotate_days=1) is True
    assert state.due_for_rotation(30 * DAY - ROTATE_GRACE_S, rotate_days=1) is False


def test_rotation_keeps_the_login_expiry_and_gives_the_old_token_a_minute(
    conn: apsw.Connection, clock: ManualClock,
) -> None:
    """The new token ends when the login would have; the old one works 60 s more, then not."""
    created = clock.time()
    login(conn, "old", created, days=30)
    clock.advance(2 * DAY)
    now = clock.time()
    with db.immediate(conn):
        expires = auth_rows.rotate_session(conn, token_hash("old"), token_hash("new"), now=now,
                                           old_until=now + ROTATE_GRACE_S)
    assert expires == created + 30 * DAY
    auth = Authenticator(configured="", read=lambda: conn, clock=clock)
    assert auth.session("new") == SessionState(now, created + 30 * DAY)
    old = auth.session("old")
    assert old == SessionState(created, now + ROTATE_GRACE_S)
    assert not old.due_for_rotation(now, rotate_days=1)  # replaced already: not again
    clock.advance(ROTATE_GRACE_S - 1)
    assert auth.session_ok("old") is True
    clock.advance(1)
    assert auth.session_ok("old") is False
    assert auth.session_ok("new") is True


def test_an_old_token_is_rotated_once_however_many_requests_carry_it(
    conn: apsw.Connection, clock: ManualClock,
) -> None:
    """A second rotation of the same old token writes nothing: one new session, not a pile."""
    login(conn, "old", clock.time())
    clock.advance(2 * DAY)
    now = clock.time()
    with db.immediate(conn):
        first = auth_rows.rotate_session(conn, token_hash("old"), token_hash("a"), now=now,
                                         old_until=now + ROTATE_GRACE_S)
    clock.advance(0.5)
    now = clock.time()
    with db.immediate(conn):
        second = auth_rows.rotate_session(conn, token_hash("old"), token_hash("b"), now=now,
                                          old_until=now + ROTATE_GRACE_S)
        gone = auth_rows.rotate_session(conn, token_hash("nobody"), token_hash("c"), now=now,
                                        old_until=now + ROTATE_GRACE_S)
    assert first is not None
    assert (second, gone) == (None, None)
    assert conn.execute("SELECT count(*) FROM auth_sessions").fetchall() == [(2,)]


def test_logging_out_deletes_only_that_session(conn: apsw.Connection, clock: ManualClock) -> None:
    """end_session removes the one row it names and says whether there was one."""
    login(conn, "mine", clock.time())
    login(conn, "other", clock.time())
    with db.immediate(conn):
        assert auth_rows.end_session(conn, token_hash("mine")) is True
        assert auth_rows.end_session(conn, token_hash("mine")) is False
    auth = Authenticator(configured="", read=lambda: conn, clock=clock)
    assert (auth.session_ok("mine"), auth.session_ok("other")) == (False, True)


def test_setting_the_password_replaces_it_and_ends_every_session(
    conn: apsw.Connection, clock: ManualClock,
) -> None:
    """The new password logs in, the old one does not, and no session survives."""
    ensure_password(conn, "", clock)
    login(conn, "a", clock.time())
    login(conn, "b", clock.time())
    assert set_password(conn, "new password", clock) == 2
    auth = Authenticator(configured="", read=lambda: conn, clock=clock)
    assert auth.password_ok("new password") is True
    assert (auth.session_ok("a"), auth.session_ok("b")) == (False, False)
    assert conn.execute("SELECT count(*) FROM auth_password").fetchall() == [(1,)]


class _Lines(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_passwd_reads_one_line_from_a_pipe_and_refuses_short_ones() -> None:
    """Piped in: the first line, newline cut; empty or under 8 characters is refused."""
    assert read_new_password(_Lines("long enough pw\nignored\n")) == "long enough pw"
    with pytest.raises(PasswordRefused, match="no password given"):
        read_new_password(_Lines(""))
    with pytest.raises(PasswordRefused, match="at least 8 characters"):
        read_new_password(_Lines("short\n"))


def test_passwd_names_where_the_configured_password_comes_from(tmp_path: Path) -> None:
    """The environment variable when it is set, else the config file given."""
    assert configured_in(tmp_path / "c.toml", {}) == str(tmp_path / "c.toml")
    assert configured_in(tmp_path / "c.toml", {PASSWORD_ENV: "x"}) == (
        f"the environment ({PASSWORD_ENV})")
