"""The server's VAPID key pair (RFC 8292): what a push service knows this server by.

A browser subscribes to Web Push with the public key (`applicationServerKey`, GET
/api/push/key), and its push service then takes only pushes signed with the private key: a
new key pair means every device has to enable notifications again. So the pair is made once,
on the first start, and kept twice: in the data directory's `vapid_private.pem` (0600, the
working copy) and in the store's `vapid_keys` row (what a backup carries). `ensure` reconciles
the two at start-up:

    file and row      the file wins; a row that differs is replaced (a warning)
    only the row      a backup restored on a new machine: the file is written from it
    only the file     the row is saved from it
    neither           a new pair is made and kept in both

A file that cannot be read or is not a P-256 private key stops the start with a StoreError
that names it: it is never replaced on its own, since the subscriptions are bound to it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import apsw
import structlog
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from chalie.errors import StoreError
from chalie.store import db, delivery_rows
from chalie.store.delivery_rows import VapidKey

FILE = "vapid_private.pem"
MODE = 0o600
MAX_FILE_BYTES = 64 * 1024  # a PEM key is a few hundred bytes; more is not a key

log = structlog.get_logger("chalie.delivery")


@dataclass(frozen=True)
class VapidKeys:
    """`private_pem`: the private key, PKCS#8 PEM; `public_key`: the uncompressed P-256 point,
    base64url without padding (what `PushManager.subscribe`'s applicationServerKey takes)."""

    private_pem: str
    public_key: str


class NotAKey(ValueError):
    """Text that is not a P-256 private key (why, in words)."""


def path_of(data_dir: Path) -> Path:
    return Path(data_dir) / FILE


def ensure(conn: apsw.Connection, data_dir: Path, now: float) -> VapidKeys:
    """The key pair, made on the first start and kept in the file and the store (run on the
    writer connection before any actor starts)."""
    path = path_of(data_dir)
    row = delivery_rows.vapid_key(conn)
    if path.exists():
        keys = read_file(path, restorable=row is not None)
        _tighten(path)
        if row is None or (row.private_pem, row.public_key) != (keys.private_pem,
                                                                 keys.public_key):
            if row is not None and row.public_key != keys.public_key:
                log.warning("vapid_key_replaced", file=str(path),
                            note="the store's VAPID key differs from the data directory's "
                                 "file; the file's is kept (devices subscribed with the "
                                 "store's key must enable notifications again)")
            _save(conn, keys, now)
        return keys
    if row is not None:
        try:
            keys = parse(row.private_pem)
        except NotAKey as e:
            raise StoreError(f"the store's VAPID key (table vapid_keys) is not usable ({e}); "
                             "delete its row to have a new key pair made (every device then "
                             "has to enable notifications again)") from None
        write_file(path, keys.private_pem)
        log.info("vapid_key_restored", file=str(path), note="written from the store's copy")
        return keys
    keys = generate()
    write_file(path, keys.private_pem)
    _save(conn, keys, now)
    log.info("vapid_key_made", file=str(path), public_key=keys.public_key)
    return keys


def generate() -> VapidKeys:
    return _keys(ec.generate_private_key(ec.SECP256R1()))


def parse(pem: str) -> VapidKeys:
    """The key pair of a PEM private key (PKCS#8 or SEC 1); NotAKey unless it is P-256."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:  # not PEM, damaged, encrypted
        raise NotAKey(f"not a PEM private key without a password: {e}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise NotAKey(f"a {type(key).__name__.lstrip('_')}, not an EC P-256 key")
    if not isinstance(key.curve, ec.SECP256R1):
        raise NotAKey(f"an EC key on {key.curve.name}, not P-256 (prime256v1)")
    return _keys(key)


def read_file(path: Path, *, restorable: bool = False) -> VapidKeys:
    """The key pair in `path`; a StoreError naming the file and what to do when it is not
    one. `restorable`: the store holds a copy the server would take in its place."""
    if restorable:
        fix = (f"move {path.name} away and the copy kept in the store is written in its place "
               "(or restore the file from a backup)")
    else:
        fix = (f"restore it from a backup, or move {path.name} away to have a new key pair "
               "made (every device then has to enable notifications again)")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise NotAKey(f"{path.stat().st_size} bytes: too large for a key")
        text = path.read_text(encoding="utf-8")
        return parse(text)
    except (OSError, UnicodeDecodeError, NotAKey) as e:
        raise StoreError(f"VAPID key file {path} cannot be used ({e}); {fix}") from None


def write_file(path: Path, pem: str) -> None:
    """Write the key atomically (a temporary file beside it, 0600 from its creation, then
    renamed over), so a crash leaves the old file or the new one, never half of one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, MODE)
        try:
            os.fchmod(fd, MODE)  # a temp file left by a crash may have had other bits
            os.write(fd, pem.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        _sync_directory(path.parent)
    except OSError as e:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise StoreError(f"cannot write the VAPID key file {path}: {e}; make the data "
                         "directory writable by this user") from None


def public_key_of(key: ec.EllipticCurvePrivateKey) -> str:
    point = key.public_key().public_bytes(serialization.Encoding.X962,
                                          serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode()


def _keys(key: ec.EllipticCurvePrivateKey) -> VapidKeys:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return VapidKeys(private_pem=pem, public_key=public_key_of(key))


def _save(conn: apsw.Connection, keys: VapidKeys, now: float) -> None:
    with db.immediate(conn):
        delivery_rows.save_vapid_key(conn, VapidKey(keys.private_pem, keys.public_key, now))


def _tighten(path: Path) -> None:
    """A key file others can read (copied in by hand) is made the owner's alone."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            os.chmod(path, MODE)
            log.warning("vapid_key_permissions", file=str(path), was=oct(mode), now=oct(MODE))
    except OSError as e:
        log.warning("vapid_key_permissions", file=str(path), problem=str(e))


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
