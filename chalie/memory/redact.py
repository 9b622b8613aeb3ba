"""What the person asked Chalie to forget stays out of every prompt.

Forgetting a knowledge item deletes it and its index rows. But the same words live on in the
text around it: the message where it was said, an episode's gist, a Current State. So each
forgotten value is kept (table `forgotten`), and text written before the forgetting is shown to
the model with the value blanked out. Text written later is left alone: when the person brings
it up again, that is new.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

BLANK = "[forgotten]"


class Redactor:
    def __init__(self, forgotten: Sequence[tuple[str, float]]) -> None:
        self._rules = [(_pattern(value), at) for value, at in forgotten if value.strip()]

    def __bool__(self) -> bool:
        return bool(self._rules)

    def __call__(self, text: str, written_at: float | None = None) -> str:
        """`text` with every value forgotten after `written_at` blanked out (all of them when
        the time is unknown)."""
        for pattern, forgotten_at in self._rules:
            if written_at is None or written_at < forgotten_at:
                text = pattern.sub(BLANK, text)
        return text


def _pattern(value: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in value.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)
