"""Signals: passive world state other programs report (spec/interfaces.md section 3).

A signal costs no LLM call. It is checked here (fields, the sender's declared signal types, the
sender's rate), kept in world state, and scored by salience: its activation energy halved every
`half_life_s`. The most salient few go into prompts, as data.

The SignalGate is used from one thread only (the edge's IOLoop: REST signals and broadcast
streams both arrive there), so it needs no lock.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from chalie.clock import Clock
from chalie.values.signals import Signal

CHAT_UI = "__chat_ui__"  # the sender cookie callers count as
ANY_TYPE = "*"
BATCH_MAX = 50
MAX_TYPE = 64
MAX_CONTENT = 4000
MAX_SOURCE = 128
MAX_TOPIC = 128
MAX_METADATA_BYTES = 8192
DEFAULT_ENERGY = 0.5
TYPE_RE = re.compile(r"\A[A-Za-z0-9_.:-]+\Z")  # \Z: "$" would let a final newline through
_AT = re.compile(r" - at `\$\.?([^`]*)`")


class SignalIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One signal as a sender posts it."""

    signal_type: str
    content: str
    source: str | None = None
    topic: str | None = None
    activation_energy: float = DEFAULT_ENERGY
    metadata: dict[str, Any] | None = None


Reason = Literal["invalid", "forbidden", "rate_limited"]
STATUS: dict[Reason, int] = {"invalid": 400, "forbidden": 403, "rate_limited": 429}


@dataclass(frozen=True)
class Rejection:
    reason: Reason
    error: str

    @property
    def status(self) -> int:
        return STATUS[self.reason]


_decode_one = msgspec.json.Decoder(SignalIn).decode
_decode_raw_list = msgspec.json.Decoder(list[msgspec.Raw]).decode
_encode = msgspec.json.encode


def decode_batch(body: bytes) -> list[msgspec.Raw]:
    """A batch body as its raw items; raises ValueError naming the problem."""
    try:
        items = _decode_raw_list(body)
    except msgspec.ValidationError:
        raise ValueError("body must be a JSON array of signals") from None
    except msgspec.DecodeError as e:
        raise ValueError(f"body is not valid JSON: {e}") from None
    if len(items) > BATCH_MAX:
        raise ValueError(f"a batch holds at most {BATCH_MAX} signals, got {len(items)}")
    return items


def parse(raw: bytes | msgspec.Raw) -> SignalIn | Rejection:
    """One signal's JSON checked field by field; a Rejection names the field."""
    try:
        signal = _decode_one(raw)
    except msgspec.ValidationError as e:
        found = _AT.search(str(e))
        field = found.group(1) if found else ""
        message = _AT.sub("", str(e))
        if not field and message.startswith("Object missing required field"):
            field, message = message.split("`")[1], "required"
        elif not field and message.startswith("Object contains unknown field"):
            field = message.split("`")[1]
            message = f"unknown field; a signal has {', '.join(SignalIn.__struct_fields__)}"
        return Rejection("invalid", f"{field or 'signal'}: {message}")
    except msgspec.DecodeError as e:
        return Rejection("invalid", f"signal is not valid JSON: {e}")
    problem = _problem(signal)
    return Rejection("invalid", problem) if problem else signal


def parse_value(value: Any) -> SignalIn | Rejection:
    """As parse(), for a signal already decoded from a larger JSON value (a stream frame)."""
    return parse(_encode(value))


def _problem(s: SignalIn) -> str | None:
    if not 0 < len(s.signal_type) <= MAX_TYPE or not TYPE_RE.match(s.signal_type):
        return (f"signal_type: 1-{MAX_TYPE} letters, digits or '_', '.', ':', '-', got "
                f"{s.signal_type[:MAX_TYPE]!r}")
    if not s.content.strip():
        return "content: must not be blank"
    if len(s.content) > MAX_CONTENT:
        return f"content: at most {MAX_CONTENT} characters, got {len(s.content)}"
    if s.source is not None and not 0 < len(s.source) <= MAX_SOURCE:
        return f"source: 1-{MAX_SOURCE} characters"
    if s.topic is not None and len(s.topic) > MAX_TOPIC:
        return f"topic: at most {MAX_TOPIC} characters"
    energy = s.activation_energy
    if not math.isfinite(energy) or not 0.0 <= energy <= 1.0:
        return f"activation_energy: must be from 0 to 1, got {energy!r}"
    if s.metadata is not None and len(_encode(s.metadata)) > MAX_METADATA_BYTES:
        return f"metadata: at most {MAX_METADATA_BYTES} bytes of JSON"
    return None


def allowed_types(declared: Sequence[str] | None) -> frozenset[str] | None:
    """Declared signal types as a set; None means any ("*" declared, or none declared)."""
    if declared is None or ANY_TYPE in declared:
        return None
    return frozenset(declared)


class RateLimiter:
    """A token bucket per sender: `per_min` signals a minute, in bursts of up to `per_min`."""

    def __init__(self, clock: Clock, per_min: int, max_senders: int = 10_000) -> None:
        self._clock = clock
        self._capacity = float(per_min)
        self._refill = per_min / 60.0
        self._max_senders = max_senders
        self._buckets: dict[str, tuple[float, float]] = {}  # sender -> (tokens, at)

    def take(self, sender: str) -> bool:
        now = self._clock.monotonic()
        tokens, at = self._buckets.get(sender, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - at) * self._refill)
        ok = tokens >= 1.0
        self._buckets[sender] = (tokens - 1.0 if ok else tokens, now)
        if len(self._buckets) > self._max_senders:  # full buckets cost nothing to forget
            del self._buckets[next(iter(self._buckets))]
        return ok

    def forget(self, sender: str) -> None:
        self._buckets.pop(sender, None)


class _Ids:
    """Signal ids: UUID-shaped, a random version-4 UUID's first 20 hex digits and a counter
    as the last 12, drawn afresh every 2**24 ids. Unique without a urandom read per signal (a
    read releases the GIL, and under load taking it back costs more than the read)."""

    def __init__(self) -> None:
        self._prefix = ""
        self._n = 1 << 24

    def next(self) -> str:
        if self._n >= 1 << 24:
            self._prefix = str(uuid.uuid4())[:24]
            self._n = 0
        self._n += 1
        return f"{self._prefix}{self._n:012x}"


class SignalGate:
    """Validation, type scoping and the rate limit, the same for REST and broadcast streams."""

    def __init__(self, clock: Clock, *, rate_per_min: int) -> None:
        self._clock = clock
        self._limiter = RateLimiter(clock, rate_per_min)
        self._rate = rate_per_min
        self._ids = _Ids()

    def admit(self, sender: str, allowed: frozenset[str] | None, parsed: SignalIn | Rejection,
              *, declared_in: str = "at pairing") -> Signal | Rejection:
        """Check one parsed signal of `sender` (allowed types: None = any, declared where
        `declared_in` says, as a 403 names it); an accepted one uses up one of the sender's
        rate."""
        if isinstance(parsed, Rejection):
            return parsed
        if allowed is not None and parsed.signal_type not in allowed:
            declared = ", ".join(sorted(allowed)) or "none"
            return Rejection("forbidden", f"signal_type {parsed.signal_type!r} is not among the "
                                          f"types declared {declared_in}: {declared}")
        if not self._limiter.take(sender):
            return Rejection("rate_limited", "rate limit exceeded: at most "
                             f"{self._rate} signals a minute per sender")
        return Signal(
            id=self._ids.next(), sender=sender, signal_type=parsed.signal_type,
            content=parsed.content, source=parsed.source or sender, topic=parsed.topic,
            activation_energy=parsed.activation_energy, metadata=parsed.metadata,
            received_at=self._clock.time(),
        )

    def forget(self, sender: str) -> None:
        self._limiter.forget(sender)


# --- salience ---------------------------------------------------------------------------------

def salience(signal: Signal, now: float, half_life_s: float) -> float:
    age = max(0.0, now - signal.received_at)
    return float(signal.activation_energy * 0.5 ** (age / half_life_s))


def rank_key(signal: Signal, half_life_s: float) -> float:
    """log2 of the signal's salience at time 0: salience(now) = 2 ** (key - now / half_life),
    so ordering by this key is ordering by salience at any time, and it never changes."""
    if signal.activation_energy <= 0:
        return -math.inf
    return math.log2(signal.activation_energy) + signal.received_at / half_life_s


class Salient(msgspec.Struct, frozen=True):
    """A signal as a prompt shows it: how salient it is now, and how old."""

    salience: float
    age_s: float
    signal: Signal


@dataclass(frozen=True)
class WorldSettings:
    world_max: int
    half_life_s: float
    min_salience: float
    top_k: int

    def floor(self, now: float) -> float:
        """The rank key under which a signal has decayed below min_salience at `now`."""
        if self.min_salience <= 0:
            return -math.inf
        return math.log2(self.min_salience) + now / self.half_life_s


def keep(signals: Iterable[Signal], now: float, settings: WorldSettings) -> tuple[Signal, ...]:
    """What world state keeps, most salient first (newest first on a tie): signals still at or
    over min_salience, at most world_max of them."""
    h = settings.half_life_s
    keyed = sorted(((rank_key(s, h), s.received_at, n, s) for n, s in enumerate(signals)),
                   key=lambda k: (k[0], k[1], -k[2]), reverse=True)
    floor = settings.floor(now)
    return tuple(s for key, _, _, s in keyed[: settings.world_max] if key >= floor)


class WorldBoard:
    """The current world state, published by the WorldState actor as one immutable tuple
    (most salient first) that readers take without a lock."""

    def __init__(self, settings: WorldSettings, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock
        self._signals: tuple[Signal, ...] = ()

    def publish(self, signals: tuple[Signal, ...]) -> None:
        self._signals = signals

    @property
    def signals(self) -> tuple[Signal, ...]:
        return self._signals

    def top(self, k: int | None = None) -> list[Salient]:
        """The most salient signals now (signals.top_k of them unless `k` says)."""
        s = self.settings
        now = self._clock.time()
        floor = s.floor(now)
        found: list[Salient] = []
        for signal in self._signals:
            if len(found) == (s.top_k if k is None else k):
                break
            if rank_key(signal, s.half_life_s) >= floor:
                found.append(Salient(salience(signal, now, s.half_life_s),
                                     max(0.0, now - signal.received_at), signal))
        return found
