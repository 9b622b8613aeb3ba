"""/api/tokens: the person makes, lists and revokes scoped API tokens (chalie/edge/tokens.py).

Only the login cookie manages tokens: a token never makes, lists or revokes one. A new token is
shown once, in POST's answer; the store keeps only its SHA-256. DELETE revokes at once: the
next request with it is a 401, and its open MCP sessions and chat streams are ended.
"""

from __future__ import annotations

import secrets
import uuid

import msgspec
import structlog

from chalie.actors.store_writer_messages import CreateApiToken, RevokeApiToken
from chalie.edge.api_spec import COOKIE_AUTH, Operation, path_id
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.tokens import (
    MAX_TOKENS,
    NAME_RE,
    NAME_RULE,
    SCOPES,
    Scope,
    TokenBoard,
    token_channel,
    token_hash,
)
from chalie.store.token_rows import TokenRow

log = structlog.get_logger("chalie.edge")


class TokenBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    scopes: list[Scope]


class TokenInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A token as listed: never the token itself. `channel`: where its chats run; `calls`:
    requests since the server started, by protocol; `open`: its MCP sessions and chat streams
    open now."""

    id: str
    name: str
    scopes: list[Scope]
    channel: str
    created_at: float
    last_used_at: float | None
    calls: dict[str, int]
    open: int


class Tokens(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[TokenInfo]


class TokenMade(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The new token: `token` is shown this once."""

    token: str
    item: TokenInfo


class TokenRevoked(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    revoked: bool = True


def info(board: TokenBoard, row: TokenRow) -> TokenInfo:
    return TokenInfo(id=row.id, name=row.name, scopes=list(row.scopes),  # type: ignore[arg-type]
                     channel=token_channel(row.name), created_at=row.created_at,
                     last_used_at=row.last_used_at, calls=board.calls(row.id),
                     open=board.open_count(row.id))


class _TokenBase(AuthedHandler):
    def board(self) -> TokenBoard:
        board = self.ctx.tokens
        if board is None:
            raise ApiError(503, "API tokens are not available on this server")
        return board


class TokensHandler(_TokenBase):
    api = {
        "get": Operation("The API tokens: names, scopes, when made and last used, calls",
                         {200: Tokens}, auth=(COOKIE_AUTH,)),
        "post": Operation(
            "Make a scoped API token; the token is in this answer only", {201: TokenMade},
            auth=(COOKIE_AUTH,), body=TokenBody, errors=(409,),
            example={"name": "laptop", "scopes": ["memory:read", "chat"]},
            description="Scopes: memory:read, memory:write, chat, signals. The name names the "
                        "token's channel (token.<name>); a name in use is a 409."),
    }

    async def get(self) -> None:
        self.query_params()
        board = self.board()
        self.write_json(Tokens([info(board, row) for row in board.all()]))

    async def post(self) -> None:
        self.query_params()
        board = self.board()
        body = self.decode_body(TokenBody)
        if not NAME_RE.fullmatch(body.name):
            raise ApiError(400, f"name: {NAME_RULE}, got {shown(body.name)}")
        if not body.scopes:
            raise ApiError(400, f"scopes: give at least one of {', '.join(SCOPES)}")
        if len(set(body.scopes)) != len(body.scopes):
            raise ApiError(400, "scopes: a scope is given twice")
        if board.named(body.name) is not None:
            raise ApiError(409, f"name: a token named {body.name!r} exists; revoke it first "
                                "or choose another name")
        if len(board.all()) >= MAX_TOKENS:
            raise ApiError(409, f"there are {MAX_TOKENS} tokens already; revoke one first")
        token = "chalie_" + secrets.token_urlsafe(32)
        row = TokenRow(id=uuid.uuid4().hex, name=body.name,
                       scopes=tuple(s for s in SCOPES if s in body.scopes),
                       token_hash=token_hash(token), created_at=self.ctx.clock.time())
        if not await self.ask("store_writer", CreateApiToken(row)):
            raise ApiError(409, f"name: a token named {body.name!r} exists")
        board.add(row)
        log.info("api_token_made", token_id=row.id, name=row.name, scopes=list(row.scopes))
        self.set_status(201)
        self.write_json(TokenMade(token, info(board, row)))


class TokenHandler(_TokenBase):
    api = {"delete": Operation(
        "Revoke a token at once: its open MCP sessions and chat streams end",
        {200: TokenRevoked}, auth=(COOKIE_AUTH,), errors=(404,),
        path=(path_id("id", "the token's id"),))}

    async def delete(self, id: str) -> None:  # the name the document gives the path part
        token_id = id
        self.query_params()
        board = self.board()
        row = board.get(token_id)
        if row is None:
            raise ApiError(404, f"no token {shown(token_id)}")
        board.remove(token_id)  # refused from now on, before the store has it
        try:
            await self.ask("store_writer", RevokeApiToken(token_id))
        except ApiError:
            board.add(row)  # not revoked in the store: it would come back at the next start
            raise
        log.info("api_token_revoked", token_id=token_id, name=row.name)
        self.write_json(TokenRevoked(token_id))
