"""An answer's text as `message_delta` frames, as the model writes it.

The turn driver hands a DeltaStream to each LLM call of an attended turn; the provider calls it
with each piece of text it streams, on the worker thread.
"""

from __future__ import annotations

from collections.abc import Callable

from chalie.frames import MessageDelta


class DeltaStream:
    """One LLM call's text as `message_delta` frames, as the provider streams it (on the
    worker thread). Leading and trailing whitespace never goes out, so an exchange's deltas
    concatenate to exactly the answer the `message` frame carries (which is stripped).
    `reset` marks the first delta when earlier deltas of the turn were not the answer."""

    def __init__(self, exchange_id: str, send: Callable[[MessageDelta], None], *,
                 reset: bool) -> None:
        self._exchange_id = exchange_id
        self._send = send
        self._reset = reset
        self._started = False
        self._held = ""  # whitespace that goes out only if more text follows it
        self.sent = False

    def __call__(self, text: str) -> None:
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        body = text.rstrip()
        if not body:
            self._held += text
            return
        out, self._held = self._held + body, text[len(body):]
        self._send(MessageDelta(exchange_id=self._exchange_id, text=out, reset=self._reset))
        self._reset = False
        self.sent = True
