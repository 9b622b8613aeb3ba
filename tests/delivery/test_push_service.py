"""The push service stand-in (tests/push_service.py) refuses what a real one refuses, so a
test's `failures == []` means the server's pushes passed real checks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from py_vapid import Vapid02
from pywebpush import WebPushException, webpush

from chalie.delivery import vapid
from tests.push_service import PushService, make_subscription


@pytest.fixture
def service() -> Iterator[PushService]:
    stand_in = PushService()
    yield stand_in
    stand_in.close()


def push(service: PushService, body: dict[str, Any], key: Vapid02 | None,
         claims: dict[str, Any] | None, **options: Any) -> int:
    try:
        response = webpush(body, data='{"a": 1}', vapid_private_key=key, vapid_claims=claims,
                           timeout=5, **options)
    except WebPushException as e:
        return int(e.response.status_code)
    return int(response.status_code)


def vapid_key() -> tuple[Vapid02, str]:
    keys = vapid.generate()
    return Vapid02.from_pem(keys.private_pem.encode()), keys.public_key


def test_a_valid_push_is_taken_and_decrypted(service: PushService) -> None:
    body, _, _ = make_subscription(service, "a")
    key, _ = vapid_key()
    assert push(service, body, key, {"sub": "mailto:me@example.org"}, ttl=60) == 201
    (taken,) = service.delivered("a")
    assert (taken.payload, service.failures) == ({"a": 1}, [])


@pytest.mark.parametrize(("claims", "status", "reason"), [
    (None, 401, "no Authorization header"),
    ({"sub": "mailto:me@example.org", "aud": "https://elsewhere.example"}, 403, "aud"),
    ({"sub": "mailto:me@example.org", "exp": int(time.time()) + 2 * 86400}, 403,
     "more than 24 hours"),
])
def test_a_push_without_valid_vapid_is_refused(service: PushService, claims: Any,
                                               status: int, reason: str) -> None:
    body, _, _ = make_subscription(service, "a")
    key, _ = vapid_key()
    assert push(service, body, key if claims else None, claims, ttl=60) == status
    assert service.pushes == []
    (failure,) = service.failures
    assert reason in failure


def test_a_push_signed_by_another_key_than_the_subscriptions_is_refused(
        service: PushService) -> None:
    _, public = vapid_key()
    body, _, _ = make_subscription(service, "a", server_key=public)
    other, _ = vapid_key()
    assert push(service, body, other, {"sub": "mailto:me@example.org"}, ttl=60) == 403
    assert "not the key the subscription was made with" in service.failures[0]


def test_a_push_encrypted_for_another_device_or_encoding_is_refused(
        service: PushService) -> None:
    """The keys of device b on device a's endpoint do not decrypt; aesgcm is not aes128gcm."""
    a, _, _ = make_subscription(service, "a")
    b, _, _ = make_subscription(service, "b")
    key, _ = vapid_key()
    claims = {"sub": "mailto:me@example.org"}
    assert push(service, {**b, "endpoint": a["endpoint"]}, key, dict(claims), ttl=60) == 400
    assert push(service, a, key, dict(claims), ttl=60, content_encoding="aesgcm") == 400
    assert service.pushes == []
    assert "does not decrypt" in service.failures[0]
    assert "not aes128gcm" in service.failures[1]
