"""A damaged database: at start, one line naming the file, the damage and the backup to restore,
exit code 2, nothing written; while running, writes stop, everything says so, reads go on."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import apsw

from tests.integration.harness import ROOT, ServerProcess, StubLlm

PAGE = 4096


def digest(directory: Path) -> dict[str, str]:
    """The store's files (not -shm: SQLite's shared-memory index, which a reader maps)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file() and p.suffix != ".db-shm"
            and not p.name.endswith("-shm")}


def overwrite_pages(db_file: Path, first: int, count: int) -> None:
    """Bytes overwritten in the middle of the file, as a failing disk or a stray write does."""
    with db_file.open("r+b") as f:
        f.seek(first * PAGE)
        f.write(b"\xa5" * (count * PAGE))
        f.flush()
        os.fsync(f.fileno())


def made_store(tmp_path: Path, llm: StubLlm, turns: int = 30) -> ServerProcess:
    """A store with some history, cleanly stopped (its WAL folded into the file)."""
    server = ServerProcess(tmp_path, llm).start()
    client = server.connect()
    for n in range(turns):
        client.turn(f"message number {n} about the garden and the boat " * 4)
    assert server.stop() == 0
    conn = apsw.Connection(str(server.db_path))  # every page in the file itself, none in a WAL
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return server


def test_a_damaged_database_at_start_is_one_line_and_exit_code_2(
    tmp_path: Path, llm: StubLlm
) -> None:
    server = made_store(tmp_path, llm)
    db_file = server.db_path
    backups = db_file.parent / "backups"
    backups.mkdir()
    (backups / "chalie-20261126T030000Z.db").write_bytes(db_file.read_bytes())
    pages = db_file.stat().st_size // PAGE
    overwrite_pages(db_file, pages // 2, 3)
    before = digest(db_file.parent)
    done = subprocess.run(
        [sys.executable, "-m", "chalie", "serve", "--config", str(server.config_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert str(db_file) in line
    assert "damaged" in line
    assert f"chalie restore {backups / 'chalie-20261126T030000Z.db'}" in line
    assert "Traceback" not in done.stdout + done.stderr
    assert digest(db_file.parent) == before  # nothing written


def test_a_file_that_is_not_a_database_names_itself_and_the_missing_backup(
    tmp_path: Path, llm: StubLlm
) -> None:
    server = made_store(tmp_path, llm, turns=1)
    overwrite_pages(server.db_path, 0, 1)  # the header too
    done = subprocess.run(
        [sys.executable, "-m", "chalie", "serve", "--config", str(server.config_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")})
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "there is no backup in" in done.stderr
    assert "chalie restore" in done.stderr
