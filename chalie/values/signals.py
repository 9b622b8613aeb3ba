"""A signal as world state keeps it (chalie/world/signals.py checks and scores signals;
chalie/store/interface_rows.py saves and reads world state)."""

from __future__ import annotations

from typing import Any

import msgspec


class Signal(msgspec.Struct, frozen=True):
    """A signal as world state keeps it; `sender` is an interface id, CHAT_UI, or
    "subscription:<name>"; `received_at` is wall-clock seconds."""

    id: str
    sender: str
    signal_type: str
    content: str
    source: str
    topic: str | None
    activation_energy: float
    metadata: dict[str, Any] | None
    received_at: float
