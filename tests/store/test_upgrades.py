"""Upgrades: a store of every earlier schema version, with data, comes up at the latest version
with all of it; a store newer than the code is refused and left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import httpx
import pytest

from chalie.errors import StoreError
from chalie.memory import fts
from chalie.store import db, memory_queries
from chalie.values.memory import Kind, mkey
from tests.integration.harness import ROOT, ServerProcess, StubLlm, db_rows
from tests.store.upgrade_fixtures import KIWI, build_store, expected, seed, versions

LATEST = db.latest_version()
EARLIER = versions()[:-1]


@pytest.fixture
def stub() -> Iterator[StubLlm]:
    llm = StubLlm()
    yield llm
    llm.close()


def old_store(data_dir: Path, version: int) -> Path:
    """A store as a Chalie of `version` left it, closed; its path."""
    path = db.db_path(data_dir)
    conn = build_store(path, version)
    seed(conn, version)
    conn.close()
    return path


def assert_upgraded(conn: apsw.Connection, version: int) -> None:
    """Everything seeded at `version` is there, in the latest schema, and the file is sound."""
    assert conn.execute("PRAGMA user_version").fetchall() == [(LATEST,)]
    for table, (sql, rows) in expected(version).items():
        assert conn.execute(sql).fetchall() == rows, table
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


@pytest.mark.parametrize("version", EARLIER)
def test_a_store_of_an_earlier_version_upgrades_with_all_its_data(
    tmp_path: Path, version: int
) -> None:
    """Opening a seeded store of an earlier version brings it to the latest schema with every
    row it held, keys normalised and histories intact."""
    old_store(tmp_path / "data", version)
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    try:
        assert_upgraded(conn, version)
    finally:
        conn.close()


@pytest.mark.parametrize("version", EARLIER)
def test_an_upgraded_store_finds_old_words_and_keeps_the_fact_history(
    tmp_path: Path, version: int
) -> None:
    """After the upgrade, full-text search finds what was said and the current facts (not the
    superseded ones), and the memory view still shows which fact replaced the old colour."""
    old_store(tmp_path / "data", version)
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    try:
        said, answer, parrot = (mkey(Kind.TRANSCRIPT, 1), mkey(Kind.TRANSCRIPT, 2),
                                mkey(Kind.KNOWLEDGE, 2))
        assert set(fts.search(conn, "Kiwi", 10)) == {said, answer}
        assert set(fts.search(conn, "parrot", 10)) == {said, parrot}
        assert fts.search(conn, "favourite colour", 10) == [mkey(Kind.KNOWLEDGE, 4)]
        assert fts.search(conn, "teal", 10) == []
        lisbon = {mkey(Kind.TRANSCRIPT, 3)} | ({mkey(Kind.EPISODE, 1)} if version >= 4 else set())
        assert set(fts.search(conn, "Lisbon", 10)) == lisbon
        history = memory_queries.knowledge_rows(conn, query="color", history=True, limit=10,
                                                offset=0)
        assert [(r["value"], r["current"], r["superseded_by"]) for r in history] == [
            ("green", True, None), ("teal", False, 4)]
    finally:
        conn.close()


@pytest.mark.parametrize("version", sorted({EARLIER[0], EARLIER[-1]}))
def test_an_old_store_is_served_and_its_conversation_goes_on(
    tmp_path: Path, stub: StubLlm, version: int
) -> None:
    """The real server starts on a store of the first (and of the last earlier) version,
    answers /health, and the next chat's prompt holds what the person said back then."""
    old_store(tmp_path / "data", version)
    server = ServerProcess(tmp_path, stub).start()
    try:
        health = httpx.get(f"{server.url}/health")
        assert health.status_code == 200
        assert health.json()["status"] == "ok"
        question = "what is my parrot called?"
        frames = server.connect().turn(question)
        assert frames[-1]["type"] == "done"
        prompts = [" ".join(str(m["content"]) for m in r["messages"]) for r in stub.requests]
        asked = [p for p in prompts if question in p]
        assert asked
        assert all(KIWI in p for p in asked)
    finally:
        code = server.stop()
    assert code == 0
    assert not server.errors()
    assert db_rows(server.db_path, "PRAGMA user_version") == [(LATEST,)]
    assert db_rows(server.db_path, "SELECT count(*) FROM turns") == [(4,)]
    assert db_rows(server.db_path, "PRAGMA integrity_check") == [("ok",)]


def test_a_store_newer_than_the_code_is_refused_and_left_unchanged(
    tmp_path: Path, stub: StubLlm
) -> None:
    """`chalie serve` on a store of a later schema exits 1 with one line naming the file and
    both versions, no traceback, and the file byte for byte as it was."""
    path = db.db_path(tmp_path / "data")
    conn = build_store(path, LATEST)
    seed(conn, LATEST)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()
    before = path.read_bytes()
    config = ServerProcess(tmp_path, stub).config_path
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    proc = subprocess.run([sys.executable, "-m", "chalie", "serve", "--config", str(config)],
                          cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"chalie: {path} has schema version {LATEST + 1}, newer than this Chalie understands "
        f"({LATEST}): it was written by a newer Chalie; run that version, or restore a backup "
        "made by this one")
    assert path.read_bytes() == before
    assert stub.requests == []


def test_migrating_a_store_at_the_latest_version_changes_nothing(tmp_path: Path) -> None:
    """Migrating a current store again returns the latest version and leaves the file as it
    was, byte for byte."""
    path = db.db_path(tmp_path / "data")
    conn = build_store(path, LATEST)
    seed(conn, LATEST)
    conn.close()
    before = path.read_bytes()
    conn = db.connect(path, busy_timeout_ms=5000)
    try:
        assert db.migrate(conn) == LATEST
        assert_upgraded(conn, LATEST)
    finally:
        conn.close()
    assert path.read_bytes() == before


def test_a_failing_migration_leaves_the_store_at_the_previous_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration that fails half-way is rolled back whole: the store keeps its version, its
    rows and no trace of the half-done change, and the error names the migration."""
    path = db.db_path(tmp_path / "data")
    conn = build_store(path, LATEST)
    seed(conn, LATEST)
    broken = f"{LATEST + 1:04d}_broken.sql"
    real = db._migrations()
    monkeypatch.setattr(db, "_migrations", lambda: [
        *real, (LATEST + 1, broken, "CREATE TABLE half_done (x);\n"
                                    "INSERT INTO no_such_table VALUES (1);")])
    try:
        with pytest.raises(StoreError, match=f"migration {broken} failed: .*no_such_table"):
            db.migrate(conn)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'"
                            ).fetchall() == []
        assert conn.execute("PRAGMA foreign_keys").fetchall() == [(1,)]
        monkeypatch.undo()
        assert_upgraded(conn, LATEST)
    finally:
        conn.close()
