"""`chalie passwd [--config FILE]`: set a new login password and end every login session.

The password is read twice without echo from a terminal, or as one line from stdin otherwise
(for scripts). Only its scrypt hash is stored (table auth_password); every row of auth_sessions
is deleted in the same transaction, on a connection of its own, so it works while the server
runs: the server reads sessions from the store on every request, so every browser is logged
out at once. Refused while auth.password is set, since that one is what logins check.
Exits 0 when the password changed, 1 when it was refused or could not be stored.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import apsw

from chalie.clock import Clock, SystemClock
from chalie.config import Config
from chalie.config_load import ENV_PREFIX
from chalie.edge.auth import MIN_PASSWORD_CHARS, set_password
from chalie.errors import ChalieError
from chalie.paths import DEFAULT_CONFIG
from chalie.store import db

PASSWORD_ENV = f"{ENV_PREFIX}AUTH__PASSWORD"


class PasswordRefused(ChalieError):
    """The new password was not given, did not match its repetition, or is too short."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("passwd", help="set a new login password; ends every session")
    parser.add_argument("--config", type=Path, help="TOML file merged over config/chalie.toml")


def run(config: Config, config_path: Path | None, *, env: Mapping[str, str],
        stdin: TextIO | None = None, clock: Clock | None = None) -> int:
    """Change the stored password; the exit code. Never prints the password."""
    if config.auth.password:
        where = configured_in(config_path, env)
        print(f"chalie: auth.password is set in {where}: change it there", file=sys.stderr)
        return 1
    try:
        password = read_new_password(stdin or sys.stdin)
    except PasswordRefused as e:
        print(f"chalie: {e}", file=sys.stderr)
        return 1
    try:
        conn = db.open_writer(config.store.path, busy_timeout_ms=config.store.busy_timeout_ms,
                              synchronous="FULL")
        try:
            ended = set_password(conn, password, clock or SystemClock())
        finally:
            conn.close()
    except (ChalieError, apsw.Error) as e:
        print(f"chalie: cannot store the password in {db.db_path(config.store.path)}: {e}",
              file=sys.stderr)
        return 1
    print(f"chalie: password changed; {ended} login session(s) ended")
    return 0


def configured_in(config_path: Path | None, env: Mapping[str, str]) -> str:
    """Where the auth.password in effect comes from: the environment wins over the file."""
    if env.get(PASSWORD_ENV):
        return f"the environment ({PASSWORD_ENV})"
    return str(config_path or DEFAULT_CONFIG)


def read_new_password(stdin: TextIO) -> str:
    """Twice without echo from a terminal; otherwise the first line of stdin."""
    if stdin.isatty():
        try:
            password = getpass.getpass("New password: ")
            again = getpass.getpass("Again: ")
        except EOFError:
            raise PasswordRefused("no password given") from None
        if password != again:
            raise PasswordRefused("the two passwords differ; nothing changed")
    else:
        password = stdin.readline().rstrip("\r\n")
    if not password:
        raise PasswordRefused("no password given; nothing changed")
    if len(password) < MIN_PASSWORD_CHARS:
        raise PasswordRefused(f"the password is too short: at least {MIN_PASSWORD_CHARS} "
                              f"characters; nothing changed")
    return password
