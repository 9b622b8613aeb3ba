"""/api/notify: the notification services Chalie reaches the person through (notify.urls, sent
with Apprise: chalie/delivery/apprise_sender.py) and the log of every delivery away from the
page.

POST /api/notify/test sends "Chalie: a test" now, to one URL (`url`: the masked form of one of
notify.urls, as GET /api/settings shows it, or a new URL to try before saving it) or to every
configured one, and answers how each went; a test is not a delivery: it is neither recorded nor
counted. GET /api/notify/log lists the deliveries, newest first, of every service (Web Push,
the Apprise URLs, Telegram): to what (the target's name, never its secret), what, how it went
(pending, held in quiet hours, sent, failed with the error and the next try, gone, dropped,
skipped while a page was visible) and when. Both need the login cookie.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Annotated, Literal

import msgspec
import structlog

from chalie.delivery import apprise_sender
from chalie.edge.api_spec import COOKIE_AUTH, OFFSET, Operation, limit_param, one_of, text_param
from chalie.edge.rest_base import ApiError, AuthedHandler
from chalie.store import delivery_rows

log = structlog.get_logger("chalie.edge")

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_URL = 4096  # characters of an Apprise URL
MAX_SERVICE = 40
Status = Literal["pending", "held", "sent", "failed", "gone", "dropped", "skipped"]
STATUSES: tuple[str, ...] = ("pending", "held", "sent", "failed", "gone", "dropped", "skipped")

_Url = Annotated[str, msgspec.Meta(
    min_length=1, max_length=MAX_URL,
    description="one of notify.urls as GET /api/settings shows it (masked), or a new Apprise "
                "URL to try")]


class TestBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which URL to test; without one, every URL of notify.urls."""

    url: _Url | None = None


class TestResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How the test went to one URL: its masked form, its service (json, ntfy, tgram...), and
    the error, secrets masked, when it failed."""

    target: str
    service: str
    result: Literal["sent", "failed"]
    error: str | None


class TestResults(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    results: list[TestResult]


class DeliveryItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One message to one target: the frame it came from (`channel`, `seq`), its kind, the
    service (webpush, telegram, or the Apprise service) and the target's name as the person
    sees it (a device's name, a masked URL, a chat's name); how it went (`attempts` so far,
    the last error, when it went and when it is tried next)."""

    id: str
    channel: str
    seq: int
    kind: str
    service: str
    target_name: str
    title: str
    status: Status
    attempts: int
    last_error: str | None
    created_at: float
    sent_at: float | None
    next_at: float | None


class DeliveryLog(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[DeliveryItem]


class NotifyTestHandler(AuthedHandler):
    api = {"post": Operation(
        "Send a test message to one notification URL, or to every one configured",
        {200: TestResults}, auth=(COOKIE_AUTH,), body=TestBody,
        example={"url": "json://127.0.0.1:8080/chalie-hook"},
        description="Sent now, each URL waiting at most notify.timeout_s; neither recorded in "
                    "the delivery log nor counted. A URL Apprise cannot use, or none "
                    "configured, is a 400.")}

    async def post(self) -> None:
        self.query_params()
        body = self.decode_body(TestBody) if self.request.body.strip() else TestBody()
        notify = self.ctx.config.notify
        urls = _chosen(list(notify.urls), body.url)

        def test(url: str) -> TestResult:
            sent = apprise_sender.notify(url, apprise_sender.TEST_TITLE,
                                         apprise_sender.TEST_BODY, timeout_s=notify.timeout_s)
            parsed = apprise_sender.parse(url)
            assert parsed is not None  # _chosen keeps only URLs Apprise can use
            return TestResult(parsed.masked, parsed.service,
                              "sent" if sent.outcome == "sent" else "failed", sent.error)

        results = list(await asyncio.gather(*(self.off_loop(partial(test, u)) for u in urls)))
        log.info("notify_tested", targets=[r.target for r in results],
                 results=[r.result for r in results])
        self.write_json(TestResults(results))


def _chosen(configured: list[str], asked: str | None) -> list[str]:
    """The URLs a test goes to: `asked` (a masked form of a configured URL, or a URL of its
    own), or every configured one Apprise can use, each once."""
    if asked is None:
        usable = [u for u in dict.fromkeys(configured) if apprise_sender.parse(u) is not None]
        if not usable:
            raise ApiError(400, "notify.urls: no notification URL is configured; add one, or "
                                "give `url`")
        return usable
    for url in configured:
        if asked in (url, apprise_sender.masked(url)):
            if apprise_sender.parse(url) is None:
                break
            return [url]
    if apprise_sender.parse(asked) is None:
        raise ApiError(400, f"url: {apprise_sender.rough(asked)} is not an Apprise URL this "
                            "server can use (https://github.com/caronc/apprise/wiki)")
    return [asked]


class NotifyLogHandler(AuthedHandler):
    api = {"get": Operation(
        "Every delivery away from the page (Web Push, notification services, Telegram), "
        "newest first, and how it went",
        {200: DeliveryLog}, auth=(COOKIE_AUTH,), query=(
            text_param("service", MAX_SERVICE, "only this service's: webpush, telegram, or an "
                                               "Apprise service (json, ntfy, tgram...)"),
            one_of("status", STATUSES, "only deliveries in it"),
            limit_param(DEFAULT_LIMIT, MAX_LIMIT), OFFSET))}

    async def get(self) -> None:
        params = self.query_params("service", "status", "limit", "offset")
        service = params.text("service", max_chars=MAX_SERVICE)
        status = params.text("status", max_chars=MAX_SERVICE)
        if status is not None and status not in STATUSES:
            raise ApiError(400, f"status: one of {', '.join(STATUSES)}")
        limit = params.whole("limit", default=DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
        offset = params.whole("offset", default=0, lo=0)

        def read() -> list[DeliveryItem]:
            rows = delivery_rows.listing(self.ctx.read(), limit=limit, offset=offset,
                                         service=service, status=status)
            return [msgspec.convert({f: getattr(r, f) for f in DeliveryItem.__struct_fields__},
                                    DeliveryItem) for r in rows]

        self.write_json(DeliveryLog(await self.off_loop(read)))
