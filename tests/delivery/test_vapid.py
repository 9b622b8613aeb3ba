"""The server's VAPID key pair: made once on the first start, kept in the data directory's
vapid_private.pem (0600) and in the store (what a backup carries), and never replaced on its
own: the devices' subscriptions are bound to it."""

from __future__ import annotations

import base64
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from chalie.delivery import vapid
from chalie.errors import StoreError
from chalie.store import db, delivery_rows

NOW = 1_700_000_000.0


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def conn(data: Path) -> Iterator[apsw.Connection]:
    conn = db.open_writer(data, busy_timeout_ms=5000, synchronous="FULL")
    yield conn
    conn.close()


def key_file(data: Path) -> Path:
    return data / "vapid_private.pem"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def events(records: list[logging.LogRecord], event: str) -> list[dict[str, Any]]:
    return [r.msg for r in records if isinstance(r.msg, dict) and r.msg.get("event") == event]


def pem_of(key: ec.EllipticCurvePrivateKey,
           fmt: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8) -> str:
    return key.private_bytes(serialization.Encoding.PEM, fmt,
                             serialization.NoEncryption()).decode()


def test_the_first_start_makes_a_p256_pair_kept_in_a_private_file_and_the_store(
        data: Path, conn: apsw.Connection) -> None:
    """The file is 0600 and holds the private key; the store's row holds the same pair; the
    public key is the 65-byte uncompressed point a browser's applicationServerKey takes."""
    keys = vapid.ensure(conn, data, NOW)
    assert mode(key_file(data)) == 0o600
    assert key_file(data).read_text() == keys.private_pem
    assert delivery_rows.vapid_key(conn) == delivery_rows.VapidKey(keys.private_pem,
                                                                    keys.public_key, NOW)
    point = base64.urlsafe_b64decode(keys.public_key + "=")
    assert (len(point), point[0], "=" in keys.public_key) == (65, 4, False)
    private = serialization.load_pem_private_key(keys.private_pem.encode(), password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert isinstance(private.curve, ec.SECP256R1)
    assert private.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint) == point
    assert [p.name for p in data.iterdir() if p.name.startswith(".vapid")] == []  # no temp file


def test_later_starts_reuse_the_pair(data: Path, conn: apsw.Connection) -> None:
    """A second start finds the pair and changes nothing: not the file, not the row."""
    first = vapid.ensure(conn, data, NOW)
    written = key_file(data).stat().st_mtime_ns
    assert vapid.ensure(conn, data, NOW + 100) == first
    assert key_file(data).stat().st_mtime_ns == written
    row = delivery_rows.vapid_key(conn)
    assert row is not None
    assert row.created_at == NOW


def test_a_backup_restored_on_a_new_machine_brings_its_key_back_into_the_file(
        data: Path, conn: apsw.Connection, log_records: list[logging.LogRecord]) -> None:
    """Only the store has the pair (the file is not in the backup): the file is written
    from it, 0600, and the devices subscribed before keep working."""
    keys = vapid.ensure(conn, data, NOW)
    key_file(data).unlink()
    assert vapid.ensure(conn, data, NOW + 100) == keys
    assert key_file(data).read_text() == keys.private_pem
    assert mode(key_file(data)) == 0o600
    assert len(events(log_records, "vapid_key_restored")) == 1


def test_a_key_file_put_in_place_by_hand_is_saved_to_the_store(
        data: Path, conn: apsw.Connection) -> None:
    """Only the file: its pair (a SEC 1 "EC PRIVATE KEY" PEM as openssl writes it) is taken
    and saved in the store; the file is left as it was."""
    data.mkdir(exist_ok=True)
    private = ec.generate_private_key(ec.SECP256R1())
    text = pem_of(private, serialization.PrivateFormat.TraditionalOpenSSL)
    key_file(data).write_text(text)
    key_file(data).chmod(0o600)
    keys = vapid.ensure(conn, data, NOW)
    assert keys.public_key == vapid.public_key_of(private)
    assert key_file(data).read_text() == text
    row = delivery_rows.vapid_key(conn)
    assert row is not None
    assert (row.private_pem, row.public_key) == (pem_of(private), keys.public_key)


def test_the_file_wins_over_a_store_that_holds_another_pair(
        data: Path, conn: apsw.Connection, log_records: list[logging.LogRecord]) -> None:
    """File and store disagree: the file's pair is used, the row is replaced with it, and a
    warning says the devices subscribed with the other key must subscribe again."""
    stored = vapid.ensure(conn, data, NOW)
    other = ec.generate_private_key(ec.SECP256R1())
    key_file(data).write_text(pem_of(other))
    keys = vapid.ensure(conn, data, NOW + 100)
    assert keys.public_key == vapid.public_key_of(other) != stored.public_key
    row = delivery_rows.vapid_key(conn)
    assert row is not None
    assert (row.public_key, row.created_at) == (keys.public_key, NOW + 100)
    warned = [r for r in log_records if r.levelno == logging.WARNING
              and isinstance(r.msg, dict) and r.msg.get("event") == "vapid_key_replaced"]
    assert len(warned) == 1


@pytest.mark.parametrize(("content", "problem"), [
    ("not a key at all\n", "not a PEM private key"),
    (None, "not P-256"),  # an EC key on another curve
    ("", "not a PEM private key"),
])
def test_a_key_file_that_cannot_be_used_stops_the_start_and_is_left_alone(
        data: Path, conn: apsw.Connection, content: str | None, problem: str) -> None:
    """An unreadable or foreign key file is a StoreError naming the file and what to do; the
    file is not replaced and the store gets no pair."""
    data.mkdir(exist_ok=True)
    if content is None:
        content = pem_of(ec.generate_private_key(ec.SECP384R1()))
    key_file(data).write_text(content)
    with pytest.raises(StoreError) as raised:
        vapid.ensure(conn, data, NOW)
    message = str(raised.value)
    assert str(key_file(data)) in message
    assert problem in message
    assert "restore it from a backup" in message
    assert key_file(data).read_text() == content
    assert delivery_rows.vapid_key(conn) is None


def test_an_unusable_file_beside_a_stored_pair_says_the_stored_one_can_take_its_place(
        data: Path, conn: apsw.Connection) -> None:
    """The error tells the person that moving the file away brings the store's copy back."""
    keys = vapid.ensure(conn, data, NOW)
    key_file(data).write_text("garbage")
    with pytest.raises(StoreError, match="copy kept in the store"):
        vapid.ensure(conn, data, NOW)
    key_file(data).unlink()
    assert vapid.ensure(conn, data, NOW) == keys


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_key_file_this_user_cannot_read_is_a_clear_error(
        data: Path, conn: apsw.Connection) -> None:
    vapid.ensure(conn, data, NOW)
    key_file(data).chmod(0o000)
    try:
        with pytest.raises(StoreError, match="Permission denied"):
            vapid.ensure(conn, data, NOW)
    finally:
        key_file(data).chmod(0o600)


def test_a_key_file_others_can_read_is_made_private(
        data: Path, conn: apsw.Connection, log_records: list[logging.LogRecord]) -> None:
    """A key copied in with mode 0644 is kept, and tightened to 0600 with a warning."""
    keys = vapid.ensure(conn, data, NOW)
    key_file(data).chmod(0o644)
    assert vapid.ensure(conn, data, NOW) == keys
    assert mode(key_file(data)) == 0o600
    assert len(events(log_records, "vapid_key_permissions")) == 1
