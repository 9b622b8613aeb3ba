"""An answer's text as message_delta frames: trimmed so they add up to exactly the message's
text."""

from __future__ import annotations

from chalie.act.stream import DeltaStream
from chalie.frames import MessageDelta


def test_whitespace_at_either_end_never_goes_out() -> None:
    """Leading blanks are dropped, trailing ones held until text follows them."""
    sent: list[MessageDelta] = []
    stream = DeltaStream("x", sent.append, reset=True)
    for piece in ["\n ", " Hello", " ", "world", " \n", "  "]:
        stream(piece)
    assert [d.text for d in sent] == ["Hello", " world"]
    assert [d.reset for d in sent] == [True, False]
    assert stream.sent
