"""What a logged frame says to the person away from the page: an `Item`.

A `notification` frame is one of three kinds by its source (goal: "goal_results", schedule:
"scheduled_results", any other: "notifications"); an `escalation` frame is "escalations", with
Approve and Deny when it waits for an answer (`expires_in_s` above 0). A `decision` frame
settles an escalation: it is not delivered, it ends the deliveries of the escalation it
answers. Every other frame is not for away from the page.
"""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.config import NotifyKind

TITLE = "Chalie"
MAX_BODY = 1000  # characters of a message's body; a push carries at most about 4 KB
MAX_ARGS = 300  # characters of an escalation's arguments shown
AWAY_TYPES = frozenset({"notification", "escalation", "decision"})


class _Frame(msgspec.Struct, frozen=True):
    """The fields of the frames read here (a lenient view of chalie/frames.py's)."""

    type: str
    seq: int = 0
    content: str = ""
    source: str | None = None
    program: str | None = None
    goal_id: str | None = None
    schedule_id: str | None = None
    approval_id: str | None = None
    tool: str = ""
    args: str = ""
    expires_in_s: float = 0.0
    exchange_id: str | None = None
    why: str | None = None
    always: bool = False
    held: bool = False
    outcome: str | None = None


_decode = msgspec.json.Decoder(_Frame).decode


class Item(msgspec.Struct, frozen=True, kw_only=True):
    """One message for the person: what every service shows of a frame."""

    kind: NotifyKind
    channel: str
    seq: int
    title: str
    body: str
    url: str  # the chat at this message
    tag: str  # one notification per tag on a device: a later one with it replaces it
    approval_id: str | None = None
    exchange_id: str | None = None
    expires_at: float | None = None  # an escalation's: not worth sending after
    actions: tuple[str, ...] = ()  # ("approve", "deny"): the escalation waits for an answer
    always: bool = False  # "Always allow this tool" may be answered beside an approval
    tool: str | None = None
    args: str | None = None
    program: str | None = None

    def payload(self) -> dict[str, Any]:
        """What a push carries (the service worker shows it; chalie/edge/static/sw.js)."""
        out: dict[str, Any] = {"kind": self.kind, "title": self.title, "body": self.body,
                               "url": self.url, "tag": self.tag, "channel": self.channel,
                               "seq": self.seq}
        if self.approval_id is not None:
            out["approval_id"] = self.approval_id
        if self.actions:
            out["actions"] = list(self.actions)
        return out

    def text(self) -> str:
        """Title and body as one plain text (a chat message, an e-mail's body)."""
        return f"{self.title}\n\n{self.body}"


class Settled(msgspec.Struct, frozen=True, kw_only=True):
    """A `decision` frame: the escalation `approval_id` was answered or ended."""

    channel: str
    approval_id: str
    outcome: str


def read(channel: str, frame: str, now: float) -> Item | Settled | None:
    """The Item (or Settled) a logged frame makes; None for a frame not for away."""
    try:
        f = _decode(frame)
    except msgspec.DecodeError:
        return None
    match f.type:
        case "notification":
            return _notification(channel, f)
        case "escalation" if f.approval_id:
            return _escalation(channel, f, now)
        case "decision" if f.approval_id:
            return Settled(channel=channel, approval_id=f.approval_id,
                           outcome=f.outcome or "answered")
    return None


def _notification(channel: str, f: _Frame) -> Item:
    kind: NotifyKind
    if f.source == "goal":
        kind, title = "goal_results", f"{TITLE} · goal"
    elif f.source == "schedule":
        kind, title = "scheduled_results", f"{TITLE} · reminder"
    else:
        kind = "notifications"
        title = f"{TITLE} · {f.program}" if f.source == "interface" and f.program else TITLE
    return Item(kind=kind, channel=channel, seq=f.seq, title=title, body=_cut(f.content),
                url=_url(channel, f.seq), tag=f"chalie-{channel}-{f.seq}", program=f.program)


def _escalation(channel: str, f: _Frame, now: float) -> Item:
    waits = f.expires_in_s > 0
    lines = [f.content]
    if f.why:
        lines.append(f"It asks because {f.why}.")
    if waits and f.args and f.args != "{}":
        lines.append(f"{f.tool} {_cut(f.args, MAX_ARGS)}")
    title = f"{TITLE} asks: {f.tool}?" if waits else f"{TITLE}: check {f.tool}"
    assert f.approval_id is not None
    return Item(kind="escalations", channel=channel, seq=f.seq, title=title,
                body=_cut("\n".join(line for line in lines if line)), url=_url(channel, f.seq),
                tag=f"chalie-approval-{f.approval_id}", approval_id=f.approval_id,
                exchange_id=f.exchange_id,
                expires_at=now + f.expires_in_s if waits else None,
                actions=("approve", "deny") if waits else (), always=waits and f.always,
                tool=f.tool, args=f.args)


def _url(channel: str, seq: int) -> str:
    """The chat at this message: the chat page shows the channel "main"."""
    return f"/#seq-{seq}" if channel == "main" else "/"


def _cut(text: str, limit: int = MAX_BODY) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"
