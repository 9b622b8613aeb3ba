"""Where an interface's signal types come from: its pair request, else its /capabilities, else
any type."""

from __future__ import annotations

import pytest

from chalie.interfaces.board import SignalsFrom, signal_scope
from chalie.store.interface_rows import InterfaceRow


def row(signals: tuple[str, ...] | None,
        capability_signals: tuple[str, ...] | None) -> InterfaceRow:
    return InterfaceRow(id="i-1", name="weather", host="127.0.0.1", port=9001, signals=signals,
                        token_hash="hash", version="1", capabilities="[]", paired_at=1.0,
                        refreshed_at=1.0, capability_signals=capability_signals)


@pytest.mark.parametrize(("signals", "capability_signals", "scope"), [
    (("weather",), ("weather", "rain"), (("weather",), "pairing")),
    (("*",), ("rain",), (("*",), "pairing")),
    ((), ("rain",), ((), "pairing")),
    (None, ("weather", "rain"), (("weather", "rain"), "capabilities")),
    (None, (), ((), "capabilities")),
    (None, None, (("*",), "any")),
])
def test_the_pair_request_wins_then_the_capabilities_then_any_type(
    signals: tuple[str, ...] | None, capability_signals: tuple[str, ...] | None,
    scope: tuple[tuple[str, ...], SignalsFrom],
) -> None:
    """A list in the pair request (even an empty one) is what the interface may emit; without
    one, the list its /capabilities declared; with neither, any type ("*")."""
    assert signal_scope(row(signals, capability_signals)) == scope
