"""Handing freed memory back to the system: glibc keeps what a big computation freed in its
arenas, so a process that once embedded a long batch or scanned every vector stays that large.
`trim()` asks it to return what it can (malloc_trim); elsewhere it does nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any


def _libc_trim() -> Any:
    """glibc's malloc_trim; None elsewhere."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_TRIM = _libc_trim()


def trim() -> None:
    if _TRIM is not None:
        _TRIM(0)
