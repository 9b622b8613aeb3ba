"""Signals: checked field by field, scoped to declared types, rate-limited, decaying."""

from __future__ import annotations

import json
import uuid

import msgspec
import pytest

from chalie.clock import ManualClock
from chalie.values.signals import Signal
from chalie.world.signals import (
    BATCH_MAX,
    Rejection,
    SignalGate,
    SignalIn,
    WorldBoard,
    WorldSettings,
    allowed_types,
    decode_batch,
    keep,
    parse,
    rank_key,
    salience,
)

HOUR = 3600.0
SETTINGS = WorldSettings(world_max=3, half_life_s=6 * HOUR, min_salience=0.15, top_k=2)


def body(**fields: object) -> bytes:
    return json.dumps({"signal_type": "weather", "content": "rain later", **fields}).encode()


def signal(content: str, *, energy: float = 0.5, at: float = 0.0) -> Signal:
    return Signal(id=content, sender="s", signal_type="t", content=content, source="s",
                  topic=None, activation_energy=energy, metadata=None, received_at=at)


def test_a_valid_signal_takes_the_contract_defaults() -> None:
    """Only signal_type and content are needed; energy defaults to 0.5, source to the sender."""
    gate = SignalGate(ManualClock(), rate_per_min=10)
    admitted = gate.admit("iface-1", None, parse(body()))
    assert isinstance(admitted, Signal)
    assert (admitted.activation_energy, admitted.source, admitted.topic) == (0.5, "iface-1", None)


@pytest.mark.parametrize(("fields", "named"), [
    ({"signal_type": None}, "signal_type"),
    ({"content": "   "}, "content"),
    ({"content": 5}, "content"),
    ({"activation_energy": 1.5}, "activation_energy"),
    ({"activation_energy": "high"}, "activation_energy"),
    ({"metadata": [1, 2]}, "metadata"),
    ({"signal_type": "has space"}, "signal_type"),
    ({"colour": "red"}, "colour"),
])
def test_an_invalid_signal_is_a_400_that_names_the_field(fields: dict[str, object],
                                                         named: str) -> None:
    """Every validation failure says which field was wrong."""
    result = parse(body(**fields))
    assert isinstance(result, Rejection)
    assert result.status == 400
    assert named in result.error


def test_a_missing_required_field_is_named() -> None:
    """A signal without content says `content: required`."""
    result = parse(b'{"signal_type": "x"}')
    assert isinstance(result, Rejection)
    assert result.error.startswith("content")


def test_undeclared_types_are_forbidden_and_star_or_nothing_declared_allows_any() -> None:
    """A declared list narrows what a sender may emit, and the 403 names where the list was
    declared and what is on it; "*", or no list at all, allows any type."""
    gate = SignalGate(ManualClock(), rate_per_min=10)
    parsed = parse(body(signal_type="stock"))
    forbidden = gate.admit("a", allowed_types(["weather", "rain"]), parsed)
    assert isinstance(forbidden, Rejection)
    assert forbidden.status == 403
    assert forbidden.error == (
        "signal_type 'stock' is not among the types declared at pairing: rain, weather")
    elsewhere = gate.admit("a", allowed_types([]), parsed, declared_in="in its /capabilities")
    assert isinstance(elsewhere, Rejection)
    assert elsewhere.error == (
        "signal_type 'stock' is not among the types declared in its /capabilities: none")
    assert isinstance(gate.admit("a", allowed_types(None), parsed), Signal)
    assert isinstance(gate.admit("a", allowed_types(["*"]), parsed), Signal)


def test_the_rate_limit_is_per_sender_and_refills_with_time() -> None:
    """Past rate_per_min a sender gets 429s; another sender does not; a minute later it may."""
    clock = ManualClock()
    gate = SignalGate(clock, rate_per_min=3)
    parsed = parse(body())
    results = [gate.admit("a", None, parsed) for _ in range(4)]
    assert [isinstance(r, Signal) for r in results] == [True, True, True, False]
    assert isinstance(results[3], Rejection)
    assert results[3].status == 429
    assert isinstance(gate.admit("b", None, parsed), Signal)
    clock.advance(20.0)  # a third of a minute: one signal's worth
    assert isinstance(gate.admit("a", None, parsed), Signal)
    assert isinstance(gate.admit("a", None, parsed), Rejection)


def test_rejected_signals_do_not_use_up_the_rate() -> None:
    """Invalid and forbidden signals cost the sender nothing."""
    gate = SignalGate(ManualClock(), rate_per_min=1)
    gate.admit("a", None, parse(b"{}"))
    gate.admit("a", frozenset({"x"}), parse(body()))
    assert isinstance(gate.admit("a", None, parse(body())), Signal)


def test_a_batch_is_an_array_of_at_most_fifty() -> None:
    """A batch body must be a JSON array of no more than 50 items."""
    assert len(decode_batch(msgspec.json.encode([{}] * BATCH_MAX))) == BATCH_MAX
    with pytest.raises(ValueError, match="at most 50"):
        decode_batch(msgspec.json.encode([{}] * (BATCH_MAX + 1)))
    with pytest.raises(ValueError, match="JSON array"):
        decode_batch(b'{"signal_type": "x"}')
    with pytest.raises(ValueError, match="not valid JSON"):
        decode_batch(b"[")


def test_salience_halves_every_half_life() -> None:
    """Activation energy decays with a 6-hour half-life."""
    s = signal("x", energy=0.8)
    assert salience(s, 0.0, 6 * HOUR) == pytest.approx(0.8)
    assert salience(s, 6 * HOUR, 6 * HOUR) == pytest.approx(0.4)
    assert salience(s, 12 * HOUR, 6 * HOUR) == pytest.approx(0.2)


def test_world_state_keeps_the_most_salient_and_drops_the_faded() -> None:
    """Over world_max the least salient go; under 0.15 a signal is gone."""
    signals = [signal("weak", energy=0.2), signal("a", energy=0.9), signal("b", energy=0.8),
               signal("c", energy=0.7), signal("d", energy=0.6, at=-20 * HOUR)]
    kept = keep(signals, 0.0, SETTINGS)
    assert [s.content for s in kept] == ["a", "b", "c"]
    assert keep(signals[:2], 0.0, SETTINGS) == (signals[1], signals[0])


def test_the_board_gives_the_top_k_now_with_their_age() -> None:
    """Prompts get the top_k most salient signals as of the clock, newest first on a tie."""
    clock = ManualClock()
    board = WorldBoard(SETTINGS, clock)
    board.publish(keep((signal("old", energy=0.9, at=clock.time() - 6 * HOUR),
                        signal("new", energy=0.5, at=clock.time()),
                        signal("mid", energy=0.6, at=clock.time())), clock.time(), SETTINGS))
    top = board.top()
    assert [(t.signal.content, round(t.salience, 2)) for t in top] == [("mid", 0.6), ("new", 0.5)]
    clock.advance(HOUR)
    assert top[0].age_s == 0.0
    assert board.top()[0].age_s == HOUR


def test_parse_refuses_non_objects() -> None:
    """A signal must be a JSON object."""
    result = parse(b"[1]")
    assert isinstance(result, Rejection)
    assert result.reason == "invalid"
    assert isinstance(parse(body()), SignalIn)


def test_the_rank_key_orders_signals_as_salience_does_at_any_time() -> None:
    """Ordering by the fixed rank key is ordering by salience now, and later, and the key
    gives salience back."""
    signals = [signal(f"s{n}", energy=e, at=t) for n, (e, t) in enumerate(
        [(0.9, -10 * HOUR), (0.3, 0.0), (0.5, -2 * HOUR), (1.0, -20 * HOUR), (0.2, 5.0)])]
    for now in (0.0, 3 * HOUR, 40 * HOUR):
        by_salience = sorted(signals, key=lambda s: salience(s, max(now, 5.0), 6 * HOUR))
        by_key = sorted(signals, key=lambda s: rank_key(s, 6 * HOUR))
        assert by_key == by_salience
    s = signals[2]
    assert 2 ** (rank_key(s, 6 * HOUR) - HOUR / (6 * HOUR)) == pytest.approx(
        salience(s, HOUR, 6 * HOUR))


def test_a_signal_with_no_energy_is_kept_nowhere() -> None:
    """activation_energy 0 is valid but never salient."""
    assert keep([signal("zero", energy=0.0)], 0.0, SETTINGS) == ()


def test_signal_ids_are_unique_version_4_uuids() -> None:
    """Every accepted signal gets its own random UUID."""
    gate = SignalGate(ManualClock(), rate_per_min=10_000)
    ids = [gate.admit("a", None, parse(body())).id for _ in range(600)]  # type: ignore[union-attr]
    assert len(set(ids)) == 600
    assert all(uuid.UUID(i).version == 4 for i in ids)
