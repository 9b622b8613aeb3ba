"""Handing memory back, and keeping the server's threads from each holding their own
(chalie.memory.heap)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chalie.memory import heap

# In a child process (malloc's settings are the whole process's): a 4 MiB block allocated and
# freed, then a 1 MiB one; prints how many blocks malloc had mapped on their own for it (glibc's
# mallinfo2: hblks).
_PROBE = """
import ctypes, sys
from chalie.memory import heap
if sys.argv[1] == "limit":
    heap.limit_arenas()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
                .split()]
libc.mallinfo2.restype = Info
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(1 << 20)
print(libc.mallinfo2().hblks - before)
"""


def test_the_servers_threads_share_a_few_malloc_arenas(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(heap, "_MALLOPT", lambda p, v: calls.append((p, v)) or 1)
    heap.limit_arenas()
    assert calls == [(heap.M_ARENA_MAX, heap.ARENAS), (heap.M_MMAP_THRESHOLD, heap.MMAP_FROM)]


@pytest.mark.skipif(heap._MALLOPT is None or not sys.platform.startswith("linux"),
                    reason="glibc's malloc only")
def test_big_blocks_stay_mapped_on_their_own_after_a_bigger_one_was_freed() -> None:
    """glibc raises its threshold for mapping a block on its own each time such a block is
    freed, so an embedding's next activations would come from the arenas and stay there; with
    the threshold fixed they are mapped, and unmapped when freed."""

    def mapped(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True,
                              text=True, check=True, timeout=60)
        return int(done.stdout.strip())

    assert mapped("limit") == 1
    assert mapped("default") == 0  # what glibc does on its own: the block from an arena


def test_without_glibc_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_MALLOPT", None)
    monkeypatch.setattr(heap, "_TRIM", None)
    heap.limit_arenas()
    heap.trim()
