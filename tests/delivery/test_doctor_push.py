"""`chalie doctor`'s Web Push line: whether the VAPID key pair is readable, or will be made,
read without writing anything (the full doctor runs as a subprocess in tests/test_doctor.py)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from chalie import doctor, doctor_away
from chalie.config import Config
from chalie.delivery import vapid
from chalie.store import db

NOW = 1_700_000_000.0


def lines(config: Config) -> list[str]:
    out = io.StringIO()
    doctor_away._push(doctor.Report(out, []), config)
    return out.getvalue().splitlines()


def test_before_the_first_start_the_keys_are_to_be_made_and_nothing_is_written(
        make_config: Callable[..., Config]) -> None:
    config = make_config()
    data = Path(config.store.path).absolute()
    assert lines(config) == [f"ok    Web Push: VAPID keys readable (none yet: serve makes "
                             f"them in {data / 'vapid_private.pem'} on its first start)"]
    assert not data.exists()


def test_a_readable_key_file_is_ok(make_config: Callable[..., Config]) -> None:
    config = make_config()
    data = Path(config.store.path).absolute()
    conn = db.open_writer(data, busy_timeout_ms=5000, synchronous="FULL")
    vapid.ensure(conn, data, NOW)
    conn.close()
    assert lines(config) == [f"ok    Web Push: VAPID keys readable: {data / 'vapid_private.pem'}"]


def test_a_key_only_the_store_holds_will_be_written_back(
        make_config: Callable[..., Config]) -> None:
    """A restored backup: the file is missing, the store has the pair; doctor says serve
    writes it, and does not."""
    config = make_config()
    data = Path(config.store.path).absolute()
    conn = db.open_writer(data, busy_timeout_ms=5000, synchronous="FULL")
    vapid.ensure(conn, data, NOW)
    conn.close()
    (data / "vapid_private.pem").unlink()
    assert lines(config) == [f"ok    Web Push: VAPID keys readable (in the store; serve "
                             f"writes {data / 'vapid_private.pem'} from it)"]
    assert not (data / "vapid_private.pem").exists()


def test_an_unreadable_key_file_fails_naming_the_file(make_config: Callable[..., Config]) -> None:
    """serve would refuse to start with it: a FAIL that says what to do."""
    config = make_config()
    data = Path(config.store.path).absolute()
    data.mkdir(parents=True)
    (data / "vapid_private.pem").write_text("not a key")
    (line,) = lines(config)
    assert line.startswith(f"FAIL  Web Push: VAPID keys readable: VAPID key file "
                           f"{data / 'vapid_private.pem'} cannot be used")
    assert "move vapid_private.pem away to have a new key pair made" in line
    assert (data / "vapid_private.pem").read_text() == "not a key"


def test_a_key_file_others_can_read_or_that_differs_from_the_store_is_a_warning(
        make_config: Callable[..., Config]) -> None:
    config = make_config()
    data = Path(config.store.path).absolute()
    conn = db.open_writer(data, busy_timeout_ms=5000, synchronous="FULL")
    vapid.ensure(conn, data, NOW)
    conn.close()
    path = data / "vapid_private.pem"
    path.chmod(0o644)
    (line,) = lines(config)
    assert line.startswith("warn  ")
    assert "other users can read it (mode 644); chmod 600 it" in line
    path.chmod(0o600)
    other = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(other.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    (line,) = lines(config)
    assert line.startswith("warn  ")
    assert "differs from the store's copy; serve keeps the file's" in line
