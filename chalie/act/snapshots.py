"""Prompt snapshots: every LLM request kept exactly as it was sent, for "why did it say that?".

`chalie snapshot TURN_ID` prints them and GET /api/turns/TURN_ID/prompts returns them.
"""

from __future__ import annotations

import msgspec

from chalie.llm.types import ChatRequest, Message
from chalie.store.memory_writes import SnapshotRow

_encode = msgspec.json.encode


_tools_json: tuple[object, str] = ((), "[]")  # the last tool list encoded, and its JSON


def snapshot(request: ChatRequest, *, call: int, purpose: str, now: float) -> SnapshotRow:
    """`purpose` says what the call was for: act, critic, compact_trail, checkpoint, backstop,
    episode_encoding."""
    global _tools_json  # noqa: PLW0603  (a one-entry cache: every call of a turn has one list)
    tools, encoded = _tools_json
    if tools is not request.tools:
        encoded = _encode([{"name": t.name, "description": t.description,
                            "parameters": t.parameters} for t in request.tools]).decode()
        _tools_json = (request.tools, encoded)
    return SnapshotRow(
        call=call,
        purpose=purpose,
        system=request.system,
        messages=_encode([_message(m) for m in request.messages]).decode(),
        tools=encoded,
        response_format=None if request.response_format is None else _encode(
            {"name": request.response_format.name,
             "schema": request.response_format.schema}).decode(),
        created_at=now,
    )


def _message(m: Message) -> dict[str, object]:
    """A message as kept: an image by its type and size, never its bytes."""
    out: dict[str, object] = {"role": m.role, "content": m.content}
    if m.images:
        out["images"] = [{"media_type": i.media_type, "bytes": len(i.data)} for i in m.images]
    return out
