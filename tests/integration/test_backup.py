"""`chalie backup`, `restore`, `export` and `import` against a real server process and its
store, and the data-directory lock that keeps a second server (or a restore) off a running one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import apsw

from chalie.store.db import latest_version
from tests.conftest import write_config
from tests.integration.harness import (
    ROOT,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)

# What the person would miss after a restore: compared row for row.
COMPARED = {
    "turns": "SELECT * FROM turns ORDER BY id",
    "transcript": "SELECT * FROM transcript ORDER BY id",
    "knowledge": "SELECT * FROM knowledge ORDER BY id",
}


def chalie(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m chalie ARGS` as a person runs it, beside the server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    return subprocess.run([sys.executable, "-m", "chalie", *args], cwd=ROOT, env=env,
                          input=stdin, capture_output=True, text=True, timeout=60, check=False)


def store_config(directory: Path) -> Path:
    """A config whose store is `directory / "data"`, for the commands that need no server."""
    directory.mkdir(parents=True, exist_ok=True)
    return write_config(directory, {"store": {"path": str(directory / "data")}})


def rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {name: db_rows(path, sql) for name, sql in COMPARED.items()}


def remember_dog(llm: StubLlm) -> None:
    remember = json.dumps({"action": "remember", "key": "dog", "value": "Rex"})
    llm.queue(completion(tool_calls=[("memory", remember)]), completion("Rex it is."))


def test_a_backup_taken_under_load_restores_into_a_working_server(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """While turns keep coming, `chalie backup` copies whole turns only; restored into a new
    data directory, a server starts on it with exactly the rows the backup holds."""
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    server = ServerProcess(tmp_path / "one", llm).start()
    remember_dog(llm)
    server.connect().turn("My dog is Rex")
    stop = threading.Event()
    done: list[int] = []
    talker = server.connect()

    def talk() -> None:
        while not stop.is_set() and len(done) < 500:
            talker.turn(f"message {len(done)}")
            done.append(1)

    thread = threading.Thread(target=talk, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(done) >= 3)
        copy = tmp_path / "copy.db"
        made = chalie("backup", str(copy), "--config", str(server.config_path))
        assert made.returncode == 0, made.stderr
        at_backup = len(done)
        wait_for(lambda: len(done) >= at_backup + 2)  # the server went on while it ran
    finally:
        stop.set()
        thread.join(30)
    assert server.stop() == 0
    backed_up = rows(copy)
    # Whole turns only: each user turn has its message and its answer, nothing more.
    turn_ids = [r[0] for r in backed_up["turns"]]
    per_turn = dict(db_rows(copy, "SELECT turn_id, count(*) FROM transcript GROUP BY turn_id"))
    assert per_turn == dict.fromkeys(turn_ids, 2)
    assert len(turn_ids) >= 1 + 3
    # The conversation backed up is the server's, as it still is: a prefix of it.
    source = rows(server.db_path)
    for name in ("turns", "transcript"):
        assert set(backed_up[name]) <= set(source[name]), name
    assert len(source["turns"]) > len(backed_up["turns"])
    assert ("dog", "Rex") in [r[1:3] for r in backed_up["knowledge"]]

    restored = ServerProcess(tmp_path / "two", llm)
    put = chalie("restore", str(copy), "--config", str(restored.config_path))
    assert put.returncode == 0, put.stderr
    restored.start()
    try:
        assert rows(restored.db_path) == backed_up
        answer = restored.connect().turn("Still there?")
        assert answer[-1]["type"] == "done"
    finally:
        assert restored.stop() == 0
    assert not restored.errors()


def test_restore_and_import_are_refused_while_a_server_runs(
    server: ServerProcess, tmp_path: Path,
) -> None:
    """With the server running on the store, restore and import exit 1 with a line naming
    the running server, and leave the store as it was; so does a second server."""
    server.connect().turn("hello")
    copy = tmp_path / "copy.db"
    assert chalie("backup", str(copy), "--config", str(server.config_path)).returncode == 0
    before = rows(server.db_path)
    assert server.proc is not None
    pid = server.proc.pid
    for command in ("restore", "import"):
        refused = chalie(command, str(copy), "--config", str(server.config_path))
        assert refused.returncode == 1
        assert refused.stderr.count("\n") == 1
        assert f"(pid {pid})" in refused.stderr
        assert str(server.db_path.parent) in refused.stderr
    second = chalie("serve", "--config", str(server.config_path))
    assert second.returncode == 1
    assert f"another Chalie server (pid {pid}) is using" in second.stderr
    assert rows(server.db_path) == before
    assert sorted(p.name for p in server.db_path.parent.iterdir()
                  if p.name.startswith("chalie.db")) == ["chalie.db", "chalie.db-shm",
                                                         "chalie.db-wal"]
    server.connect().turn("still here")


def test_restore_refuses_a_damaged_file_and_a_newer_store(tmp_path: Path) -> None:
    """A file that is not a sound store, or one from a newer Chalie, is refused with a line
    saying which, and no store is made."""
    config = store_config(tmp_path / "target")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"SQLite format 3\0" + b"\x07" * 8000)
    refused = chalie("restore", str(junk), "--config", str(config))
    assert refused.returncode == 1
    assert "junk.db: " in refused.stderr
    assert ("not a SQLite database" in refused.stderr
            or "integrity check failed" in refused.stderr)

    newer = tmp_path / "newer.db"
    conn = apsw.Connection(str(newer))
    conn.execute("CREATE TABLE turns (id TEXT); PRAGMA user_version = 999")
    conn.close()
    refused = chalie("restore", str(newer), "--config", str(config))
    assert refused.returncode == 1
    assert "schema version 999 is newer than this Chalie" in refused.stderr
    assert "upgrade Chalie first" in refused.stderr
    assert not (tmp_path / "target" / "data" / "chalie.db").exists()


def test_an_export_imports_into_a_new_store_and_not_into_one_with_memory(
    server: ServerProcess, llm: StubLlm, tmp_path: Path,
) -> None:
    """`chalie export` then `chalie import` into a new data directory gives back the turns,
    transcript and knowledge; importing again into that store is refused."""
    remember_dog(llm)
    client = server.connect()
    client.turn("My dog is Rex")
    client.turn("And I live in Lisbon")
    made = chalie("export", "-", "--config", str(server.config_path))
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout.splitlines()[0])["kind"] == "chalie-export"
    server.stop()

    config = store_config(tmp_path / "fresh")
    taken = chalie("import", "-", "--config", str(config), stdin=made.stdout)
    assert taken.returncode == 0, taken.stderr
    assert "2 turn, 4 transcript, 1 knowledge" in taken.stdout
    fresh_db = tmp_path / "fresh" / "data" / "chalie.db"
    assert rows(fresh_db) == rows(server.db_path)

    again = chalie("import", "-", "--config", str(config), stdin=made.stdout)
    assert again.returncode == 1
    assert "not empty" in again.stderr
    assert rows(fresh_db) == rows(server.db_path)


def test_export_to_a_file_writes_what_import_reads(tmp_path: Path) -> None:
    """An export of a new store is just its header, and such a file imports."""
    source = store_config(tmp_path / "a")
    target = store_config(tmp_path / "b")
    missing = chalie("export", str(tmp_path / "out.jsonl"), "--config", str(source))
    assert missing.returncode == 1
    assert "no store at" in missing.stderr
    made = chalie("import", str(tmp_path / "nothing.jsonl"), "--config", str(source))
    assert made.returncode == 1
    assert "nothing.jsonl" in made.stderr
    assert not (tmp_path / "a" / "data").exists()  # a failed import makes no store
    assert chalie("import", "-", "--config", str(source),
                  stdin=_header_only()).returncode == 0
    out = tmp_path / "out.jsonl"
    assert chalie("export", str(out), "--config", str(source)).returncode == 0
    assert chalie("import", str(out), "--config", str(target)).returncode == 0
    assert rows(tmp_path / "b" / "data" / "chalie.db") == {name: [] for name in COMPARED}


def _header_only() -> str:
    return json.dumps({"kind": "chalie-export", "format": 1,
                       "schema_version": latest_version(), "exported_at": 0.0}) + "\n"
