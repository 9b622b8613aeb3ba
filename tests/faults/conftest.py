"""Faults a server meets in months on a small machine, each against a real server process.

Root is needed to mount the small file systems that fill up or turn read-only (a tmpfs, a
read-only bind mount: root ignores file modes, so chmod cannot stand in); without it those
tests are skipped with one line.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import StubLlm


@pytest.fixture
def llm() -> Iterator[StubLlm]:
    stub = StubLlm()
    yield stub
    stub.close()


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount ({done.stderr.strip()}): the fault needs root and mount")


def umount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs at tmp_path/data: the store's file system, to fill."""
    if os.geteuid() != 0:
        pytest.skip("filling a disk needs root (to mount a small tmpfs)")
    data = tmp_path / "data"
    data.mkdir()
    mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(data))
    yield data
    umount(data)


def fill(directory: Path) -> Path:
    """Fill the file system of `directory` to the last byte; the filler file, to delete."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (1 << 20, 4096, 1):  # big writes, then the last pages and bytes
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def kept(client: Any, text: str, client_id: str) -> list[dict[str, Any]]:
    """Send a chat while the store cannot take writes: the frames up to the `error` saying it
    is kept, and the `done` after it when a turn had started for it (it ran into the fault)
    rather than being kept at once (the store was known to be faulted when it arrived)."""
    client.send({"type": "chat", "text": text, "client_id": client_id})
    frames: list[dict[str, Any]] = client.recv_until(lambda f: f["type"] == "error")
    if frames[-1].get("exchange_id"):
        frames += client.recv_until(lambda f: f["type"] == "done")
    return frames
