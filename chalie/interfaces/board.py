"""The paired interfaces as readers see them: rows, online state, and who holds which token.

Published by the InterfaceHealth actor as one immutable mapping swapped whole; the edge reads it
on every bearer-authenticated request (token -> interface) and for the interface list, without
a lock or an ask. Tokens are kept only as SHA-256 hashes; the lookup is by hash and the stored
hash is compared again in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import types
from collections.abc import Mapping
from typing import Literal

import msgspec

from chalie.store.interface_rows import InterfaceRow
from chalie.world.signals import ANY_TYPE

PROVIDER_PREFIX = "interface:"

SignalsFrom = Literal["pairing", "capabilities", "any"]


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def provider_key(interface_id: str) -> str:
    """The interface's key in the tool catalog."""
    return f"{PROVIDER_PREFIX}{interface_id}"


def signal_scope(row: InterfaceRow) -> tuple[tuple[str, ...], SignalsFrom]:
    """The signal types the interface may emit (("*",): any) and where they were declared: the
    pair request's list wins, then its /capabilities' list; with neither, any type."""
    if row.signals is not None:
        return row.signals, "pairing"
    if row.capability_signals is not None:
        return row.capability_signals, "capabilities"
    return (ANY_TYPE,), "any"


class InterfaceState(msgspec.Struct, frozen=True):
    row: InterfaceRow
    online: bool = True
    failures: int = 0  # health checks failed in a row
    last_check_at: float | None = None
    last_error: str | None = None
    changed_at: float | None = None  # when it last went offline or came back


class InterfaceBoard:
    def __init__(self) -> None:
        # (by id, token hash -> id): one tuple, swapped whole, so both always agree.
        self._current: tuple[Mapping[str, InterfaceState], Mapping[str, str]] = (
            types.MappingProxyType({}), types.MappingProxyType({}))

    def publish(self, states: Mapping[str, InterfaceState]) -> None:
        by_token = {s.row.token_hash: i for i, s in states.items()}
        self._current = (types.MappingProxyType(dict(states)),
                         types.MappingProxyType(by_token))

    def get(self, interface_id: str) -> InterfaceState | None:
        return self._current[0].get(interface_id)

    def all(self) -> list[InterfaceState]:
        return sorted(self._current[0].values(), key=lambda s: (s.row.paired_at, s.row.id))

    def by_token(self, token: str) -> InterfaceState | None:
        """The interface this bearer token belongs to, or None."""
        by_id, by_token = self._current
        wanted = token_hash(token)
        interface_id = by_token.get(wanted)
        if interface_id is None:
            return None
        state = by_id.get(interface_id)
        if state is None or not hmac.compare_digest(state.row.token_hash, wanted):
            return None
        return state
