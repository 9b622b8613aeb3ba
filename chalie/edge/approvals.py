"""The person answers an escalation from away from the page: a push notification's Approve or
Deny (POST /api/approvals/<approval_id>), a Telegram button.

The answer goes to the Session of the escalation's channel as the `approval` action a /ws page
sends, by the person (`by` "page" in its `decision` frame); the Session decides, as for any
answer: a running turn's escalation is answered in it, a held call is approved (it runs) or
denied, one answered or expired already gets an `error` frame on the channel.
"""

from __future__ import annotations

from chalie.actors.session_messages import ActionRequest, Deliver
from chalie.edge.context import EdgeContext
from chalie.store import approval_rows, delivery_rows, queries


def channel_of(ctx: EdgeContext, approval_id: str) -> str | None:
    """The channel an escalation was shown on: a held call's, the one its delivery away from
    the page came from, or the one whose log holds it; None for an escalation of none of the
    person's channels (blocking: it reads the store)."""
    conn = ctx.read()
    held = approval_rows.held(conn, approval_id)
    if held is not None:
        return held.channel
    rows = delivery_rows.of_approval(conn, approval_id)
    if rows:
        return rows[0].channel
    channel = queries.escalation_channel(conn, approval_id)
    if channel is None or channel.startswith(delivery_rows.PROGRAM_CHANNELS):
        return None  # a program's conversation's: that program answers it
    return channel


def answer(ctx: EdgeContext, channel: str, approval_id: str, approve: bool, *,
           always: bool = False) -> bool:
    """Tell the channel's Session the person's answer; False when the sessions are
    restarting (nothing was told)."""
    params: dict[str, object] = {"approval_id": approval_id, "approve": approve}
    if always:
        params["always"] = True
    return ctx.directory.tell("sessions", Deliver(channel, ActionRequest(
        skill="approval", params=params, received_at=ctx.clock.monotonic(), via="page")))
