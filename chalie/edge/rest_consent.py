"""The person's consent over REST: the tools they always allow, and the calls held for them.

GET /api/tools/allowances lists every "Always allow this tool" the person gave (from an
escalation's card); DELETE /api/tools/allowances/<id> revokes one: the tool asks again from its
next call on. GET /api/approvals lists the calls held for the person's approval (a program's
words asked for them, or they need approval, on a turn the person did not watch), newest
first, with what became of them; they are answered on /ws like any escalation, or with
POST /api/approvals/<approval_id> (a push notification's Approve and Deny; chalie/edge/
approvals.py). All need the login cookie.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from chalie.edge import approvals
from chalie.edge.api_spec import COOKIE_AUTH, OFFSET, Operation, limit_param, path_id
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.rest_schedules import apply
from chalie.store import approval_rows
from chalie.store.consent_ops import RevokeAllowance

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class AllowanceItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A tool the person always allows: the program that provides it ("interface:<id>",
    "mcp:<name>", or "chalie" for Chalie's own), its own name for the tool, the name the
    person saw, and when they allowed it."""

    id: str
    provider: str
    tool: str
    shown_as: str
    created_at: float


class Allowances(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[AllowanceItem]


class Revoked(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    revoked: str


class HeldCallItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A call held for the person: the channel they are asked on, which path's turn asked for
    it, the tool and its arguments (JSON), why it needs them, its state (waiting; approved: it
    ran in `ran_turn_id`; denied; expired) and when it expires."""

    id: str
    channel: str
    path: str
    tool: str
    args: str
    reason: str
    provider: str | None
    turn_id: str | None
    status: Literal["waiting", "approved", "denied", "expired"]
    created_at: float
    expires_at: float
    decided_at: float | None
    decided_by: str | None
    ran_turn_id: str | None


class HeldCalls(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[HeldCallItem]


class AllowancesHandler(AuthedHandler):
    api = {"get": Operation("The tools the person always allows", {200: Allowances},
                            auth=(COOKIE_AUTH,))}

    async def get(self) -> None:
        self.query_params()
        rows = await self.off_loop(lambda: approval_rows.allowances(self.ctx.read()))
        self.write_json(Allowances([AllowanceItem(**msgspec.structs.asdict(r)) for r in rows]))


class AllowanceHandler(AuthedHandler):
    api = {"delete": Operation(
        "Revoke an allowance: the tool asks the person again from its next call",
        {200: Revoked}, auth=(COOKIE_AUTH,),
        path=(path_id("allowance_id", "the allowance's id"),), errors=(404,))}

    async def delete(self, allowance_id: str) -> None:
        self.query_params()
        (gone,) = await apply(self, RevokeAllowance(allowance_id))
        if not gone:
            raise ApiError(404, f"no allowance {shown(allowance_id)}")
        self.write_json(Revoked(allowance_id))


class AnswerBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    approve: bool
    always: bool = False  # with approve: the tool runs without asking from now on, when the
    # escalation offered it (its `always`)


class AnswerAccepted(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    approval_id: str
    channel: str
    accepted: Literal[True] = True


class AnswerHandler(AuthedHandler):
    api = {"post": Operation(
        "Answer an escalation as the person (a push notification's Approve or Deny)",
        {202: AnswerAccepted}, auth=(COOKIE_AUTH,), body=AnswerBody, errors=(404, 503),
        path=(path_id("approval_id", "the escalation's approval_id"),),
        example={"approve": True},
        description="Accepted: the answer goes to the escalation's conversation, whose "
                    "`decision` frame (by \"page\") says how it ended; one answered or "
                    "expired already gets an `error` frame there instead.")}

    async def post(self, approval_id: str) -> None:
        self.query_params()
        body = self.decode_body(AnswerBody)
        channel = await self.off_loop(lambda: approvals.channel_of(self.ctx, approval_id))
        if channel is None:
            raise ApiError(404, f"no escalation {shown(approval_id)} was shown away from the "
                                "page or held for the person")
        if not approvals.answer(self.ctx, channel, approval_id, body.approve,
                                always=body.always):
            raise ApiError(503, "Chalie is restarting; try again shortly")
        self.set_status(202)
        self.write_json(AnswerAccepted(approval_id, channel))


class ApprovalsHandler(AuthedHandler):
    api = {"get": Operation(
        "Calls held for the person's approval, newest first, and what became of them",
        {200: HeldCalls}, auth=(COOKIE_AUTH,), query=(limit_param(DEFAULT_LIMIT, MAX_LIMIT),
                                                      OFFSET))}

    async def get(self) -> None:
        params = self.query_params("limit", "offset")
        limit = params.whole("limit", default=DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
        offset = params.whole("offset", default=0, lo=0)
        now = self.ctx.clock.time()

        def read() -> list[HeldCallItem]:
            rows = approval_rows.listing(self.ctx.read(), limit=limit, offset=offset)
            return [HeldCallItem(**{**msgspec.structs.asdict(r), "status": "expired"
                                    if r.status == "waiting" and r.expires_at <= now
                                    else r.status}) for r in rows]

        self.write_json(HeldCalls(await self.off_loop(read)))
