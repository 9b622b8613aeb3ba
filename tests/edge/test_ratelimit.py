"""The REST token bucket: a minute's burst, then the rate; per key; bounded memory."""

from __future__ import annotations

import pytest

from chalie.clock import ManualClock
from chalie.edge.ratelimit import RestRateLimit
from chalie.edge.rest_base import same_origin


def test_a_key_may_burst_a_minutes_worth_then_waits_for_the_refill() -> None:
    """With 6 a minute, six requests go at once; the seventh is told to wait 10 s."""
    clock = ManualClock()
    limit = RestRateLimit(clock)
    assert [limit.take("a", 6) for _ in range(6)] == [None] * 6
    assert limit.take("a", 6) == pytest.approx(10.0)
    clock.advance(10.0)
    assert limit.take("a", 6) is None
    assert limit.take("a", 6) == pytest.approx(10.0)


def test_a_refused_request_spends_nothing() -> None:
    """Asking again while refused does not push the wait further out."""
    clock = ManualClock()
    limit = RestRateLimit(clock)
    limit.take("a", 1)
    assert limit.take("a", 1) == pytest.approx(60.0)
    clock.advance(30.0)
    assert limit.take("a", 1) == pytest.approx(30.0)
    clock.advance(30.0)
    assert limit.take("a", 1) is None


def test_each_key_has_its_own_bucket() -> None:
    """One credential at its limit does not slow another."""
    limit = RestRateLimit(ManualClock())
    assert limit.take("a", 1) is None
    assert limit.take("a", 1) is not None
    assert limit.take("b", 1) is None


def test_a_rate_of_zero_is_no_limit_and_keeps_nothing() -> None:
    """rest_rate_per_min = 0 lets everything through without tracking keys."""
    limit = RestRateLimit(ManualClock())
    assert all(limit.take("a", 0) is None for _ in range(1000))
    assert len(limit) == 0


def test_a_lowered_rate_applies_to_a_full_bucket_at_once() -> None:
    """The rate is read per request: a bucket never holds more than the current rate."""
    limit = RestRateLimit(ManualClock())
    assert limit.take("a", 100) is None
    assert [limit.take("a", 2) for _ in range(3)] == [None, None, pytest.approx(30.0)]


def test_at_most_max_keys_are_kept_dropping_the_least_recent() -> None:
    """A flood of new keys forgets the oldest bucket, not the recently used one."""
    limit = RestRateLimit(ManualClock(), max_keys=2)
    limit.take("old", 1)
    limit.take("recent", 1)
    limit.take("recent", 1)
    limit.take("new", 1)
    assert len(limit) == 2
    assert limit.take("old", 1) is None  # forgotten: a fresh, full bucket
    assert limit.take("new", 1) is not None


@pytest.mark.parametrize(("origin", "host", "same"), [
    ("http://127.0.0.1:8081", "127.0.0.1:8081", True),
    ("https://chalie.example", "chalie.example", True),  # behind a TLS proxy
    ("https://Chalie.Example:443", "chalie.example", True),
    ("http://chalie.example/brain?x=1", "chalie.example", True),  # a Referer
    ("http://chalie.example:8081", "chalie.example", False),
    ("https://evil.example", "chalie.example", False),
    ("http://chalie.example.evil.example", "chalie.example", False),
    ("null", "chalie.example", False),
    ("file:///etc/passwd", "chalie.example", False),
    ("http://[::1", "chalie.example", False),
    ("", "chalie.example", False),
])
def test_same_origin_compares_the_host_and_port_over_http_or_https(
    origin: str, host: str, same: bool
) -> None:
    """An Origin or Referer names this server only with the request's own host and port."""
    assert same_origin(origin, host) is same


def test_wrong_credentials_spend_an_address_bucket_that_wait_reads_without_spending() -> None:
    """`spend` counts a request even past the limit (made-up credentials cannot outrun it);
    `wait` says how long until the key may send again and spends nothing itself."""
    clock = ManualClock()
    limit = RestRateLimit(clock)
    assert limit.wait("failed:ip", 2) is None
    limit.spend("failed:ip", 2)
    assert limit.wait("failed:ip", 2) is None
    limit.spend("failed:ip", 2)
    assert limit.wait("failed:ip", 2) == pytest.approx(30.0)
    limit.spend("failed:ip", 2)  # past the limit: the wait grows
    assert limit.wait("failed:ip", 2) == pytest.approx(60.0)
    assert limit.wait("failed:ip", 2) == pytest.approx(60.0)
    clock.advance(60.0)
    assert limit.wait("failed:ip", 2) is None
    assert limit.wait("failed:ip", 0) is None
