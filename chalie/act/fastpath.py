"""Messages that end a turn with no LLM call: nothing to answer, or the person calling it off."""

from __future__ import annotations

import re

# Whole-message phrases only: "cancel my appointment" is a request, "cancel" is not.
_CANCEL = re.compile(
    r"^(?:cancel|stop|abort|never ?mind|nevermind|forget it|forget about it|scratch that|"
    r"no(?:,)? (?:never ?mind|forget it|stop))$"
)


def is_empty(text: str) -> bool:
    return not text.strip()


def is_cancel(text: str) -> bool:
    """True for a plain cancel phrase, ignoring case, surrounding space and end punctuation."""
    cleaned = text.strip().casefold().rstrip(".!… ")
    return bool(_CANCEL.match(cleaned))
