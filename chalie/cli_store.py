"""`chalie backup|restore|export|import`: the store's commands (registered by chalie/cli.py).

backup FILE    a consistent copy of the store, safe while the server runs
restore FILE   check FILE and put it in place of the store; refused while a server runs on it
               (the old store is kept beside it as chalie.db.before-restore-<UTC time>)
export FILE    the person's memory as JSON Lines ("-": stdout); safe while the server runs
import FILE    an export ("-": stdin) into a new, empty store; refused while a server runs on it

Each exits 0 when done, 1 when it failed (one line on stderr naming the problem), 2 for a
configuration error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import IO

from chalie.config import Config
from chalie.errors import ChalieError, StoreError
from chalie.store import backup as backups
from chalie.store import db
from chalie.store.export import export, import_, lines_of
from chalie.store.lock import DataLock

COMMANDS = ("backup", "restore", "export", "import")
_HELP = {
    "backup": ("a consistent copy of the store, safe while the server runs",
               "where to write the copy"),
    "restore": ("put a backup in place of the store (stop the server first)",
                "the backup to restore"),
    "export": ("write the memory as JSON Lines", 'where to write it ("-": stdout)'),
    "import": ("read an export into a new, empty store (stop the server first)",
               'the export to read ("-": stdin)'),
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the store's subcommands to chalie's parser."""
    for name in COMMANDS:
        what, file_help = _HELP[name]
        parser = sub.add_parser(name, help=what)
        parser.add_argument("file", metavar="FILE", help=file_help)
        parser.add_argument("--config", type=Path,
                            help="TOML file merged over config/chalie.toml")


def run(command: str, file: str, config: Config) -> int:
    """Run one store command; its exit code."""
    data_dir = Path(config.store.path)
    try:
        match command:
            case "backup":
                backups.backup(db.db_path(data_dir), Path(file))
                _say(f"chalie: backup of {db.db_path(data_dir)} written to {file}")
            case "restore":
                kept = backups.restore(Path(file), data_dir)
                kept_note = f"; the old store is kept as {kept}" if kept else ""
                _say(f"chalie: restored {file} into {data_dir}{kept_note}")
            case "export":
                counts = _export(data_dir, file, config.store.busy_timeout_ms)
                _say(f"chalie: exported {_counted(counts)}", err=file == "-")
            case "import":
                counts = _import(data_dir, file, config)
                _say(f"chalie: imported {_counted(counts)}")
    except (ChalieError, OSError) as e:
        print(f"chalie: {command}: {e}", file=sys.stderr)
        return 1
    return 0


def _export(data_dir: Path, file: str, busy_timeout_ms: int) -> dict[str, int]:
    path = db.db_path(data_dir)
    if not path.is_file():
        raise StoreError(f"no store at {path} (store.path = {str(data_dir)!r})")
    conn = db.connect(path, busy_timeout_ms=busy_timeout_ms, readonly=True)
    try:
        if file == "-":
            return export(conn, sys.stdout)
        out = Path(file)
        tmp = out.with_name(f".{out.name}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as stream:
                counts = export(conn, stream)
                stream.flush()
                os.fsync(stream.fileno())
            tmp.replace(out)
        finally:
            tmp.unlink(missing_ok=True)
        return counts
    finally:
        conn.close()


def _import(data_dir: Path, file: str, config: Config) -> dict[str, int]:
    if file == "-":
        return _import_from(data_dir, sys.stdin, config)
    with Path(file).open(encoding="utf-8") as stream:  # opened first: a typo makes no store
        return _import_from(data_dir, stream, config)


def _import_from(data_dir: Path, stream: IO[str], config: Config) -> dict[str, int]:
    with DataLock(data_dir):
        conn = db.open_writer(data_dir, busy_timeout_ms=config.store.busy_timeout_ms,
                              synchronous=config.store.synchronous)
        try:
            return import_(conn, lines_of(stream), time.time())
        finally:
            conn.close()


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def _say(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()
