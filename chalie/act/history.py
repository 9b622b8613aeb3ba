"""The conversation so far as a prompt shows it: one line per transcript line, the person's,
Chalie's own, or a paired program's message (fenced as data, naming the program)."""

from __future__ import annotations

from collections.abc import Sequence

from chalie.prompts import Prompts
from chalie.store.queries import HistoryLine

_FRAGMENT = {"user": "history_person", "program": "history_program"}  # else: Chalie's own line


def history_text(prompts: Prompts, history: Sequence[HistoryLine], *,
                 after_state: bool) -> tuple[str, tuple[int, ...]]:
    """The history's text, and where each of its lines but the last ends in it (before the
    newline that joins it to the next: so a line ends in the same place whether or not another
    follows it). With no history: that it starts here, or (`after_state`) that nothing was
    said since the Current State."""
    f = prompts.fragment
    if not history:
        return f("history_none_since_state") if after_state else f("history_empty"), ()
    lines = [f(_FRAGMENT.get(h.role, "history_assistant"),
               text=prompts.message_of(h.speaker, h.text) if h.role == "program" else h.text)
             for h in history]
    ends: list[int] = []
    for line in lines[:-1]:
        ends.append((ends[-1] + 1 if ends else 0) + len(line))
    return "\n".join(lines), tuple(ends)
