"""HeldMessages: what a Session keeps while the store cannot take writes, and how it gives it
back."""

from __future__ import annotations

from pathlib import Path

from chalie.actors.session_held import HeldMessages
from chalie.actors.session_messages import ActionRequest, UserMessage
from chalie.clock import ManualClock
from chalie.frames import Done, Error
from chalie.store.health import StoreHealth


def test_kept_messages_come_back_in_order_each_received_anew(tmp_path: Path) -> None:
    """A message kept past act.timeout_s must still get its whole time budget: it is given
    back as received when the store takes writes again."""
    clock, pushed = ManualClock(), []
    health = StoreHealth(tmp_path, min_free_mb=1, hold_limit=5)
    held = HeldMessages(health, pushed.append, clock.monotonic)
    health.failed("full", "database or disk is full", now=clock.time())
    assert held.holds()
    held.keep(UserMessage(text="one", received_at=clock.monotonic(), client_id="a"))
    held.keep(UserMessage(text="two", received_at=clock.monotonic(), client_id="b"),
              exchange_id="x1")
    assert [type(f) for f in pushed] == [Error, Error, Done]  # the second's turn had run
    assert health.held == 2
    clock.advance(3600.0)
    health.recovered()
    assert held.holds()  # still: kept messages go first, new ones queue behind them
    assert [f.exchange_id for f in held.closings()] == ["x1", "x1"]  # logged once, now
    assert held.closings() == ()
    released = held.release()
    assert [(m.text, m.received_at) for m in released] == [("one", clock.monotonic()),
                                                          ("two", clock.monotonic())]
    assert health.held == 0
    assert not held.holds()


def test_past_the_limit_or_on_a_damaged_store_a_message_is_refused(tmp_path: Path) -> None:
    clock, pushed = ManualClock(), []
    health = StoreHealth(tmp_path, min_free_mb=1, hold_limit=1)
    held = HeldMessages(health, pushed.append, clock.monotonic)
    health.failed("read_only", "attempt to write a readonly database", now=0.0)
    held.keep(UserMessage(text="kept", received_at=0.0))
    held.keep(UserMessage(text="refused", received_at=0.0))
    held.keep(ActionRequest(skill="x", params={}, received_at=0.0))
    assert len(held) == 1
    assert ["your message is kept" in f.message for f in pushed if isinstance(f, Error)] == [
        True, False, False]
    health.failed("damaged", "database disk image is malformed", now=1.0)
    health.release(1)
    held.keep(UserMessage(text="refused too", received_at=0.0))
    assert "could not be kept" in pushed[-1].message
