"""The Apprise sender against a real JSON webhook on 127.0.0.1 (Apprise's json:// URL, a
stdlib HTTP server): a message arrives with its title and body and is sent; an escalation says
it waits for an answer in the page; a hook that answers 500 or never answers is a failed send
with Apprise's words; a URL's password or token is never in an error or a log line; the targets
and their kinds follow the config in effect."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest

from chalie.config import Config
from chalie.delivery import apprise_sender
from chalie.delivery.apprise_sender import AppriseSender, key_of
from chalie.delivery.items import Item
from chalie.delivery.senders import Sent, Target

WAIT_S = 10.0
SECRET = "pw-Kx81zQ-hook-secret"


@dataclass(frozen=True)
class Received:
    path: str
    body: dict[str, Any]
    authorization: str | None


class Hook:
    """A JSON webhook on 127.0.0.1: keeps every POST, answers each with its path's status in
    `by_path`, else the next of `statuses` (200 once they run out); while `hold` is set it
    waits for it before answering."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.statuses: list[int] = []
        self.by_path: dict[str, int] = {}
        self.hold: threading.Event | None = None
        self._changed = threading.Condition()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                with hook._changed:
                    status = hook.by_path.get(self.path) or (
                        hook.statuses.pop(0) if hook.statuses else 200)
                    hold = hook.hold
                if hold is not None:
                    hold.wait(WAIT_S)
                with hook._changed:
                    hook.received.append(Received(self.path, body,
                                                  self.headers.get("Authorization")))
                    hook._changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()

    def url(self, path: str = "/hook", auth: str = "") -> str:
        return f"json://{auth}127.0.0.1:{self.port}{path}"

    def wait_for(self, count: int, what: Callable[[Received], bool] = lambda _: True,
                 timeout: float = WAIT_S) -> list[Received]:
        """The requests `what` accepts, once there are `count` of them."""
        with self._changed:
            assert self._changed.wait_for(
                lambda: len([r for r in self.received if what(r)]) >= count, timeout), (
                f"the hook got {self.received}")
            return [r for r in self.received if what(r)]

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(WAIT_S)


@pytest.fixture
def hook() -> Iterator[Hook]:
    found = Hook()
    yield found
    found.close()


class Settings:
    """The config in effect, as the server's callable returns it: changed by `set`."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> Config:
        return self.config

    def set(self, **notify: Any) -> None:
        self.config = msgspec.structs.replace(
            self.config, notify=msgspec.structs.replace(self.config.notify, **notify))


@pytest.fixture
def settings(make_config: Callable[..., Config]) -> Settings:
    return Settings(make_config(notify={"timeout_s": 5.0}))


def item(kind: str = "notifications", body: str = "The plants need water.",
         **extra: Any) -> Item:
    return msgspec.convert({"kind": kind, "channel": "main", "seq": 7, "title": "Chalie",
                            "body": body, "url": "/#seq-7", "tag": "chalie-main-7", **extra},
                           Item)


def only_target(sender: AppriseSender) -> Target:
    [target] = sender.targets()
    return target


def test_a_message_reaches_the_hook_with_its_title_and_body(
    hook: Hook, settings: Settings,
) -> None:
    """A json:// URL is one target (key apprise:<hash>, service json, its URL as its name);
    the message arrives as Apprise's JSON (title, message, type info) and is sent."""
    url = hook.url()
    settings.set(urls=[url], kinds=["notifications", "goal_results"])
    sender = AppriseSender(settings)
    target = only_target(sender)
    assert target == Target(key_of(url), "json", url, frozenset({"notifications",
                                                                  "goal_results"}))
    assert target.key.startswith("apprise:")
    assert len(target.key) == len("apprise:") + 16
    assert sender.send(target, item()) == Sent("sent")
    [got] = hook.wait_for(1)
    assert got.path == "/hook"
    assert (got.body["title"], got.body["message"], got.body["type"]) == (
        "Chalie", "The plants need water.", "info")


def test_an_escalation_says_it_waits_for_an_answer_in_the_page(
    hook: Hook, settings: Settings,
) -> None:
    """Apprise carries nothing back: an escalation that waits is sent as a warning whose
    body ends by saying where to answer it."""
    settings.set(urls=[hook.url()], kinds=["escalations"])
    sender = AppriseSender(settings)
    waiting = item("escalations", "Send the e-mail to Ana?", approval_id="ap-1",
                   actions=("approve", "deny"))
    assert sender.send(only_target(sender), waiting) == Sent("sent")
    [got] = hook.wait_for(1)
    assert got.body["type"] == "warning"
    assert got.body["message"] == ("Send the e-mail to Ana?\n\n"
                                   "It waits for your answer in Chalie's page.")


def test_a_hook_that_answers_500_is_a_failed_send_with_apprises_words(
    hook: Hook, settings: Settings,
) -> None:
    """The service's refusal is a failed send (the Delivery actor tries again later) whose
    error is what Apprise said of it."""
    hook.statuses = [500]
    settings.set(urls=[hook.url()])
    sender = AppriseSender(settings)
    sent = sender.send(only_target(sender), item())
    assert sent.outcome == "failed"
    assert sent.error is not None
    assert "error=500" in sent.error
    assert "Failed to send JSON" in sent.error


def test_a_password_in_the_url_is_in_no_error_and_no_log_line(
    hook: Hook, settings: Settings, log_records: list[logging.LogRecord],
) -> None:
    """The URL's password reaches the hook (Basic auth) but nothing Chalie shows: not the
    target's name, not a failure's error (a 500, a closed port), not a log line of any
    logger, Apprise's own included; an unusable URL holding one is skipped with a warning
    that names only its scheme."""
    url = hook.url(auth=f"chalie:{SECRET}@")
    closed = f"json://chalie:{SECRET}@127.0.0.1:1/hook"
    unusable = f"nosuchservice://chalie:{SECRET}@example.org/"
    settings.set(urls=[url, closed, unusable])
    sender = AppriseSender(settings)
    targets = sender.targets()
    assert [t.name for t in targets] == [f"json://chalie:****@127.0.0.1:{hook.port}/hook",
                                         "json://chalie:****@127.0.0.1:1/hook"]
    hook.statuses = [500, 200]
    failed = sender.send(targets[0], item())
    refused = sender.send(targets[1], item())
    assert sender.send(targets[0], item()) == Sent("sent")
    assert [g.authorization for g in hook.wait_for(2)][-1] is not None
    assert failed.outcome == refused.outcome == "failed"
    assert "Connection error" in str(refused.error)
    shown = [t.name for t in targets] + [str(failed.error), str(refused.error)]
    logged = [r.getMessage() + repr(r.__dict__) for r in log_records]
    assert [line for line in shown + logged if SECRET in line] == []
    skipped = [r for r in log_records if "apprise_url_skipped" in r.getMessage()]
    assert len(skipped) == 1
    assert "nosuchservice://…" in repr(skipped[0].__dict__)


def test_a_hook_that_never_answers_fails_within_the_timeout(
    hook: Hook, settings: Settings,
) -> None:
    """notify.timeout_s bounds a send: a hook that holds the request is a failed send, and
    the hook's late answer changes nothing."""
    hook.hold = threading.Event()
    settings.set(urls=[hook.url()], timeout_s=0.3)
    sender = AppriseSender(settings)
    sent = sender.send(only_target(sender), item())
    assert sent.outcome == "failed"
    assert "Connection error" in str(sent.error)
    hook.hold.set()
    hook.wait_for(1)


def test_targets_and_their_kinds_follow_the_config_in_effect(
    hook: Hook, settings: Settings,
) -> None:
    """Each call reads the config: a URL added is a new target, a kind removed is no longer
    taken, the same URL twice is one target, and a URL removed is gone for a send still
    addressed to it."""
    first, second = hook.url("/one"), hook.url("/two")
    settings.set(urls=[first], kinds=["notifications", "escalations"])
    sender = AppriseSender(settings)
    old = only_target(sender)
    assert old.kinds == frozenset({"notifications", "escalations"})
    settings.set(urls=[first, second, first], kinds=["goal_results"])
    assert [(t.key, t.kinds) for t in sender.targets()] == [
        (key_of(first), frozenset({"goal_results"})),
        (key_of(second), frozenset({"goal_results"}))]
    settings.set(urls=[second])
    assert [t.key for t in sender.targets()] == [key_of(second)]
    assert sender.send(old, item()) == Sent("gone", "no longer in notify.urls")
    assert hook.received == []


@pytest.mark.parametrize(("url", "service", "shown", "secret"), [
    ("ntfys://ntfy.example/alerts?token=tk_Kx81zQsecret", "ntfy",
     "ntfys://t...t@ntfy.example/alerts", "tk_Kx81zQsecret"),
    ("tgram://123456789:AAHk81zQsecretsecretsecret12/987654", "tgram",
     "tgram://1...2/987654/", "AAHk81zQsecretsecretsecret12"),
    ("mailtos://me:Kx81zQsecret@mail.example.org?to=me@example.org", "mailto",
     "mailtos://me:****@mail.example.org/me%40example.org", "Kx81zQsecret"),
    ("jsons://hook.example/x?+Authorization=Bearer%20Kx81zQsecret", "json",
     "jsons://hook.example/x?+Authorization=****", "Kx81zQsecret"),
])
def test_a_services_secrets_are_masked_in_its_name(url: str, service: str, shown: str,
                                                   secret: str) -> None:
    """What is shown of a URL is Apprise's privacy form with only the parameters the person
    wrote (header values hidden too); the service is the schema Apprise knows it by; a text
    quoting the URL or its secret shows neither."""
    parsed = apprise_sender.parse(url)
    assert parsed is not None
    assert (parsed.service, parsed.masked) == (service, shown)
    said = apprise_sender.hide(f"failed at {url}: {secret} refused", [url])
    assert said == f"failed at {shown}: **** refused"
