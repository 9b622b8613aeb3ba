"""The store's files cannot be written while the server runs (a file system remounted
read-only, an immutable file, permissions): messages are kept and answered once they can be.

Root ignores file modes, and a file system cannot be remounted read-only while the server holds
its files open for writing (EBUSY), so the files are made immutable (chattr +i): the kernel then
refuses every write to them with EPERM, root's too, through the descriptors already open, as it
refuses them with EROFS after a remount."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.faults.conftest import kept
from tests.integration.harness import ServerProcess, StubLlm, db_rows, wait_for


def immutable(files: list[Path], on: bool) -> None:
    for path in files:
        subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True,
                       capture_output=True)


@pytest.fixture
def can_chattr(tmp_path: Path) -> Iterator[list[Path]]:
    probe = tmp_path / "probe"
    probe.write_text("x")
    if os.geteuid() != 0 or shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(probe)], capture_output=True, check=False).returncode != 0:
        pytest.skip("a read-only store needs root and chattr on a file system that has it")
    immutable([probe], on=False)
    made: list[Path] = []
    yield made
    immutable([p for p in made if p.exists()], on=False)


def test_a_store_that_cannot_be_written_keeps_messages_until_it_can(
    tmp_path: Path, can_chattr: list[Path], llm: StubLlm
) -> None:
    server = ServerProcess(tmp_path, llm, store={"fault_probe_s": 0.2}).start()
    try:
        cookie = server.login()
        client = server.connect(cookie)
        assert client.turn("before")[-2]["type"] == "message"
        files = [server.db_path, server.db_path.with_name("chalie.db-wal")]
        can_chattr.extend(files)
        immutable(files, on=True)
        error = next(f for f in kept(client, "while read-only", "r-1") if f["type"] == "error")
        assert "cannot be written" in error["message"]
        assert "kept" in error["message"]
        reply = httpx.get(f"{server.url}/health", timeout=10,
                          cookies={"chalie_session": cookie})  # the details are the person's
        assert reply.status_code == 503
        assert reply.json()["store"]["state"] == "read_only"
        # What is stored can still be read; what needs a write says why.
        turns = httpx.get(f"{server.url}/api/turns", timeout=10,
                          cookies={"chalie_session": cookie})
        assert turns.status_code == 200
        assert [t["user_text"] for t in turns.json()["items"]] == ["before"]
        login = httpx.post(f"{server.url}/auth/login", json={"password": server.password})
        assert login.status_code == 503
        assert "cannot be written" in login.json()["error"]
        immutable(files, on=False)
        # Its answer now (after, when its turn had run into the fault, that exchange's closing
        # frames as the live client saw them, logged at last).
        answered = client.recv_until(lambda f: f["type"] == "message")
        assert answered[-1]["type"] == "message"
        wait_for(lambda: httpx.get(f"{server.url}/health", timeout=10).status_code == 200)
        assert [t for (t,) in db_rows(server.db_path, "SELECT user_text FROM turns "
                                                       "ORDER BY started_at")] == \
            ["before", "while read-only"]
    finally:
        server.kill()
