"""The socket hub: frames pushed from any thread reach every socket of their channel, in order,
on the IOLoop; keepalive and shutdown reach every socket."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection

from tornado.ioloop import IOLoop

from chalie.edge.hub import SocketHub
from chalie.frames import Status, encode_frame


class FakeSocket:
    def __init__(self) -> None:
        self.sent: list[tuple[int, bool]] = []
        self.pinged: list[int] = []
        self.closed: tuple[int | None, str | None] | None = None
        self.thread: str | None = None

    def send_frame(self, seq: int, frame: str, *, again: bool = False) -> None:
        self.thread = threading.current_thread().name
        self.sent.append((seq, again))

    def keepalive(self, max_misses: int) -> None:
        self.pinged.append(max_misses)

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        self.closed = (code, reason)


def frame(seq: int) -> str:
    return encode_frame(Status(stage="processing", exchange_id="x"), seq)


def test_a_push_from_another_thread_reaches_every_socket_of_its_channel_on_the_loop() -> None:
    """Two tabs on `main` get both frames in order, on the IOLoop's thread; `work` gets none."""
    tab_a, tab_b, other = FakeSocket(), FakeSocket(), FakeSocket()

    async def scenario() -> None:
        hub = SocketHub(IOLoop.current())
        hub.register("main", tab_a)
        hub.register("main", tab_b)
        hub.register("work", other)
        pusher = threading.Thread(target=hub.push, args=("main", [frame(1), frame(2)]),
                                  kwargs={"again": True})
        pusher.start()
        pusher.join()
        await asyncio.sleep(0)  # one pass of the loop runs the callback the push added
        assert hub.count() == 3

    IOLoop.current().run_sync(scenario)
    assert tab_a.sent == tab_b.sent == [(1, True), (2, True)]
    assert tab_a.thread == threading.current_thread().name
    assert other.sent == []


def test_keepalive_and_shutdown_reach_every_socket_and_unregistered_ones_are_gone() -> None:
    """keepalive asks each socket to ping; close_all closes each with 1001."""
    kept, gone = FakeSocket(), FakeSocket()

    async def scenario() -> None:
        hub = SocketHub(IOLoop.current())
        hub.register("main", kept)
        hub.register("main", gone)
        hub.unregister("main", gone)
        hub.keepalive(2)
        hub.close_all("server shutting down")
        assert hub.count() == 1

    IOLoop.current().run_sync(scenario)
    assert (kept.pinged, gone.pinged) == ([2], [])
    assert kept.closed == (1001, "server shutting down")
    assert gone.closed is None


def test_sockets_whose_login_ended_are_closed_and_the_others_stay() -> None:
    """close_ended asks, off the loop, which of the open sockets' logins are live, and closes
    the rest with 1008; a socket opened without a login (none here) is never asked about."""
    mine, other, anonymous = FakeSocket(), FakeSocket(), FakeSocket()
    mine.session, other.session = "hash-mine", "hash-other"  # type: ignore[attr-defined]
    asked: list[set[str]] = []

    def live(hashes: Collection[str]) -> set[str]:
        asked.append(set(hashes))
        return {"hash-other"}

    async def scenario() -> int:
        hub = SocketHub(IOLoop.current())
        for sink in (mine, other, anonymous):
            hub.register("main", sink)
        return await hub.close_ended(live)

    assert IOLoop.current().run_sync(scenario) == 1
    assert asked == [{"hash-mine", "hash-other"}]
    assert (mine.closed, other.closed, anonymous.closed) == ((1008, "logged out"), None, None)


def test_a_page_counts_as_visible_from_its_presence_frame_until_it_hides_or_closes() -> None:
    """visible_pages (read by the Delivery actor from its thread) counts the sockets whose page
    said it is visible; one that never said, hid, or closed does not count."""
    shown, hidden, silent = FakeSocket(), FakeSocket(), FakeSocket()

    async def scenario() -> list[int]:
        hub = SocketHub(IOLoop.current())
        for sink in (shown, hidden, silent):
            hub.register("main", sink)
        counts = [hub.visible_pages]
        hub.seen(shown, True)
        hub.seen(hidden, True)
        counts.append(hub.visible_pages)
        hub.seen(hidden, False)
        hub.seen(hidden, False)  # said twice: still not counted twice
        counts.append(hub.visible_pages)
        hub.unregister("main", shown)
        counts.append(hub.visible_pages)
        return counts

    assert IOLoop.current().run_sync(scenario) == [0, 2, 1, 0]
