"""Web Push to a device, against a push service stand-in on 127.0.0.1 that checks each push as
RFC 8030, 8291 and 8292 require and decrypts it with the device's keys (tests/push_service.py):
what the device gets, and what the Delivery actor is told when the push service says no."""

from __future__ import annotations

import email.utils
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.config import Config
from chalie.delivery import vapid, webpush
from chalie.delivery.items import Item
from chalie.delivery.senders import ALL_KINDS, Target
from chalie.delivery.vapid import VapidKeys
from chalie.delivery.webpush import WebPushSender
from chalie.store import db, delivery_rows
from chalie.store.delivery_rows import PushSubscription
from tests.push_service import PushService, make_subscription

NOW = 1_700_000_000.0


@pytest.fixture
def service() -> Iterator[PushService]:
    stand_in = PushService()
    yield stand_in
    stand_in.close()


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    yield conn
    conn.close()


@pytest.fixture
def keys(conn: apsw.Connection, tmp_path: Path) -> VapidKeys:
    return vapid.ensure(conn, tmp_path / "data", NOW)


@pytest.fixture
def config(make_config: Callable[..., Config]) -> Config:
    return make_config(push={"subject": "mailto:me@example.org", "ttl_s": 3600},
                       notify={"timeout_s": 5.0})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=0.0, wall=NOW)


@pytest.fixture
def sender(conn: apsw.Connection, keys: VapidKeys, config: Config,
           clock: ManualClock) -> WebPushSender:
    return WebPushSender(lambda: conn, keys, lambda: config, clock=clock)


def device(conn: apsw.Connection, service: PushService, name: str,
           keys: VapidKeys | None = None) -> PushSubscription:
    """A device subscribed at the stand-in (bound to `keys`' public key, when given) and
    stored as a push subscription."""
    body, _, _ = make_subscription(service, name, None if keys is None else keys.public_key)
    row = PushSubscription(id=f"id-{name}", endpoint=body["endpoint"],
                           p256dh=body["keys"]["p256dh"], auth=body["keys"]["auth"],
                           name=f"{name}'s phone", created_at=NOW)
    with db.immediate(conn):
        delivery_rows.subscribe(conn, row)
    return row


def target(row: PushSubscription) -> Target:
    return Target(key=f"push:{row.id}", service="webpush", name=row.name)


def item(body: str = "The kettle is on.", **extra: object) -> Item:
    fields: dict[str, object] = {"kind": "notifications", "channel": "main", "seq": 7,
                                 "title": "Chalie", "body": body, "url": "/#seq-7",
                                 "tag": "chalie-main-7", **extra}
    return Item(**fields)  # type: ignore[arg-type]


def test_every_device_is_a_target_of_every_kind(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    """One target per subscription, keyed by its id and named as the person named it."""
    a, b = device(conn, service, "a"), device(conn, service, "b")
    assert sender.name == "webpush"
    assert sender.targets() == [
        Target(key="push:id-a", service="webpush", name=a.name, kinds=ALL_KINDS),
        Target(key="push:id-b", service="webpush", name=b.name, kinds=ALL_KINDS)]


def test_a_push_arrives_encrypted_for_the_device_and_signed_with_the_servers_key(
        conn: apsw.Connection, service: PushService, sender: WebPushSender,
        keys: VapidKeys, config: Config) -> None:
    """The stand-in verifies the VAPID JWT (aud its origin, exp within 24 h, sub the
    configured contact, signed by the server's key) and decrypts the payload: the item's."""
    row = device(conn, service, "phone", keys)
    sent = sender.send(target(row), item())
    assert (sent.outcome, sent.error, service.failures) == ("sent", None, [])
    (push,) = service.delivered("phone")
    assert push.payload == item().payload() == {
        "kind": "notifications", "title": "Chalie", "body": "The kettle is on.",
        "url": "/#seq-7", "tag": "chalie-main-7", "channel": "main", "seq": 7}
    assert push.vapid_key == keys.public_key
    assert (push.claims["aud"], push.claims["sub"]) == (service.origin,
                                                        "mailto:me@example.org")
    assert (push.headers["ttl"], push.headers["urgency"],
            push.headers["content-encoding"]) == ("3600", "normal", "aes128gcm")


def test_an_escalation_is_urgent_and_lives_no_longer_than_it_waits(
        conn: apsw.Connection, service: PushService, sender: WebPushSender,
        keys: VapidKeys) -> None:
    """Urgency high, and a TTL that ends when the escalation expires (not a day later); its
    payload carries the approval and its actions."""
    row = device(conn, service, "phone", keys)
    escalation = item("Send the e-mail?", kind="escalations", approval_id="ap-1",
                      actions=("approve", "deny"), expires_at=NOW + 120)
    assert sender.send(target(row), escalation).outcome == "sent"
    (push,) = service.delivered("phone")
    assert (push.headers["urgency"], push.headers["ttl"]) == ("high", "120")
    assert (push.payload["approval_id"], push.payload["actions"]) == ("ap-1",
                                                                      ["approve", "deny"])


def test_a_body_too_long_for_one_push_is_cut_to_fit(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    """A push holds at most 4096 bytes: a long body (4000 bytes of emoji) arrives cut short
    with an ellipsis, the rest of the payload whole."""
    row = device(conn, service, "phone")
    assert sender.send(target(row), item("😀" * 1000)).outcome == "sent"
    (push,) = service.delivered("phone")
    assert service.failures == []
    assert push.payload["body"].endswith("…")
    assert push.payload["body"].startswith("😀" * 500)
    assert push.payload["url"] == "/#seq-7"
    assert len(push.text.encode()) <= webpush.MAX_PAYLOAD


def test_the_test_push_says_it_is_one(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    row = device(conn, service, "phone")
    assert sender.send_to(row, webpush.test_item()).outcome == "sent"
    (push,) = service.delivered("phone")
    assert push.payload["test"] is True
    assert push.payload["kind"] == "notifications"


@pytest.mark.parametrize("status", [404, 410])
def test_a_device_its_push_service_no_longer_knows_is_gone(
        conn: apsw.Connection, service: PushService, sender: WebPushSender,
        status: int) -> None:
    """404 or 410: gone (the Delivery actor removes it), with the status in the error and
    the endpoint's secret path nowhere in it."""
    row = device(conn, service, "phone")
    service.answer("phone", status, body="push subscription has unsubscribed or expired")
    sent = sender.send(target(row), item())
    assert sent.outcome == "gone"
    assert sent.error is not None
    assert sent.error.startswith(f"{service.origin}/… answered {status}")
    assert "unsubscribed or expired" in sent.error
    assert "/push/phone" not in sent.error
    assert service.failures == []


def test_a_push_service_that_is_busy_says_when_to_try_again(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    """429 with Retry-After in seconds: failed, to retry after that long."""
    row = device(conn, service, "phone")
    service.answer("phone", 429, retry_after="120")
    sent = sender.send(target(row), item())
    assert (sent.outcome, sent.retry_after_s) == ("failed", 120.0)
    assert sent.error is not None
    assert "429" in sent.error


def test_retry_after_as_a_date_is_read_against_the_clock(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    """503 with Retry-After as an HTTP date five minutes ahead of the (injected) clock."""
    row = device(conn, service, "phone")
    service.answer("phone", 503, retry_after=email.utils.formatdate(NOW + 300, usegmt=True))
    sent = sender.send(target(row), item())
    assert (sent.outcome, sent.retry_after_s) == ("failed", 300.0)


def test_a_server_error_is_a_failure_to_try_again(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    row = device(conn, service, "phone")
    service.answer("phone", 500, body="internal error")
    sent = sender.send(target(row), item())
    assert (sent.outcome, sent.retry_after_s) == ("failed", None)
    assert sent.error == f"{service.origin}/… answered 500 Internal Server Error: internal error"


def test_another_refusal_says_the_status_and_the_services_reason(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    """A 4xx other than 404, 410 and 429 (a payload the service will not take): failed,
    with what the service said."""
    row = device(conn, service, "phone")
    service.answer("phone", 413, body="Payload Too Large")
    sent = sender.send(target(row), item())
    assert sent.outcome == "failed"
    assert sent.error == (f"{service.origin}/… answered 413 Request Entity Too Large: "
                          "Payload Too Large")


def test_a_push_service_that_cannot_be_reached_is_a_failure_without_the_secret_path(
        conn: apsw.Connection, sender: WebPushSender) -> None:
    """Connection refused: failed, saying so, with the endpoint's origin only."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    row = PushSubscription(id="id-x", endpoint=f"http://127.0.0.1:{port}/push/s3cr3t-path",
                           p256dh=webpush.check_keys(
                               "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-"
                               "Ts1XbjhazAkj7I99e8QcYP7DkM", "tBHItJI5svbpez7KI4CCXg")[0],
                           auth="tBHItJI5svbpez7KI4CCXg", name="gone phone", created_at=NOW)
    sent = sender.send_to(row, item())
    assert sent.outcome == "failed"
    assert sent.error is not None
    assert sent.error.startswith(f"http://127.0.0.1:{port}/…: could not connect")
    assert "refused" in sent.error.lower()
    assert "s3cr3t" not in sent.error


def test_a_device_removed_meanwhile_is_gone(
        conn: apsw.Connection, service: PushService, sender: WebPushSender) -> None:
    """A target whose subscription is no longer stored: gone, and nothing is pushed."""
    row = device(conn, service, "phone")
    with db.immediate(conn):
        delivery_rows.unsubscribe(conn, row.id, NOW, "removed")
    assert sender.send(target(row), item()).outcome == "gone"
    assert service.pushes == []


def test_the_subject_is_read_from_the_config_in_effect(
        conn: apsw.Connection, service: PushService, keys: VapidKeys,
        make_config: Callable[..., Config], clock: ManualClock) -> None:
    """push.subject changed by a reload is in the next push's claims."""
    configs = [make_config(push={"subject": "mailto:first@example.org"})]
    sender = WebPushSender(lambda: conn, keys, lambda: configs[-1], clock=clock)
    row = device(conn, service, "phone")
    sender.send(target(row), item())
    configs.append(make_config(push={"subject": "https://example.org/contact"}))
    sender.send(target(row), item())
    assert [p.claims["sub"] for p in service.delivered()] == [
        "mailto:first@example.org", "https://example.org/contact"]
    assert service.failures == []


@pytest.mark.parametrize(("endpoint", "problem"), [
    ("ftp://push.example.org/x", "an https:// URL"),
    ("http://push.example.org/x", "http:// only to a push service on this machine"),
    ("http://127.example.org/x", "http:// only to a push service on this machine"),
    ("https://user:pw@push.example.org/x", "no user name or password"),
    ("https://push.example.org/a b", "no spaces"),
    ("https:///x", "an https:// URL"),
    ("https://push.example.org:99999/x", "not a URL"),
    ("https://push.example.org/" + "x" * 2048, "at most 2048 characters"),
])
def test_an_endpoint_that_is_no_push_services_url_is_refused(endpoint: str,
                                                             problem: str) -> None:
    with pytest.raises(webpush.BadSubscription) as raised:
        webpush.check_endpoint(endpoint)
    assert (raised.value.field, problem in raised.value.problem) == ("endpoint", True)


@pytest.mark.parametrize("endpoint", [
    "https://fcm.googleapis.com/fcm/send/abc:def", "http://127.0.0.1:8080/push/a",
    "http://localhost/push/a", "http://[::1]:9/push", "http://127.0.0.2/push"])
def test_push_services_urls_are_taken(endpoint: str) -> None:
    assert webpush.check_endpoint(endpoint) == endpoint


def test_keys_must_be_a_p256_point_and_a_16_byte_secret() -> None:
    """A point off the curve or a short secret is refused, naming the key."""
    good = "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"
    off_curve = "BA" + "A" * 85
    with pytest.raises(webpush.BadSubscription, match="not a point of the P-256 curve"):
        webpush.check_keys(off_curve, "tBHItJI5svbpez7KI4CCXg")
    with pytest.raises(webpush.BadSubscription, match="16 bytes, got 12"):
        webpush.check_keys(good, "tBHItJI5svbpez7K")
    assert webpush.check_keys(good + "=", "tBHItJI5svbpez7KI4CCXg==") == (
        good, "tBHItJI5svbpez7KI4CCXg")


def test_what_is_shown_of_an_endpoint_is_its_origin() -> None:
    assert webpush.shown_endpoint("https://FCM.googleapis.com:443/fcm/send/secret") == \
        "https://fcm.googleapis.com/…"
    assert webpush.origin("http://127.0.0.1:8080/push/a") == "http://127.0.0.1:8080"


@pytest.mark.parametrize("status", [200, 202, 204])
def test_any_success_status_is_sent(conn: apsw.Connection, service: PushService,
                                    sender: WebPushSender, status: int) -> None:
    """RFC 8030 says 201, but a push service answering another 2xx took the push too."""
    row = device(conn, service, "phone")
    service.answer("phone", status)
    assert sender.send(target(row), item()).outcome == "sent"
    assert service.failures == []
