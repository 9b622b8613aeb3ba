"""Scoped API tokens as the edge sees them: who holds which token, what each may do, and
the open MCP sessions and chat streams each one has, so revoking a token ends them at once.

A token is made with the login cookie (POST /api/tokens) and shown once; only its SHA-256 is
kept, in the store and here. The board is read and changed on the IOLoop only. When a token
was last used is kept here and written to the store at most every `TOUCH_EVERY_S`.

Scopes: `memory:read` (search and list what Chalie remembers), `memory:write` (remember and
forget), `chat` (talk to Chalie: MCP's ask_chalie, /v1/chat/completions) and `signals` (report
world state). A token never manages tokens, settings or pairing: those take the login cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from typing import Literal

import msgspec

from chalie.store.token_rows import TokenRow

Scope = Literal["memory:read", "memory:write", "chat", "signals"]
SCOPES: tuple[Scope, ...] = ("memory:read", "memory:write", "chat", "signals")
Protocol = Literal["mcp", "openai"]
PROTOCOLS: tuple[Protocol, ...] = ("mcp", "openai")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
NAME_RULE = "1-32 letters, digits, '_' or '-', starting with a letter or digit"
CHANNEL_PREFIX = "token."
TOUCH_EVERY_S = 30.0
MAX_TOKENS = 100


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_channel(name: str) -> str:
    """The channel a token's conversation runs on: its name's, so a token made again under
    the same name carries on the same conversation."""
    return f"{CHANNEL_PREFIX}{name}"


class Refused(Exception):
    """A request's token cannot do what it asks: `status` 401 (no token, or an unknown or
    revoked one) or 403 (the token lacks the scope)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class TokenBoard:
    def __init__(self) -> None:
        self._by_id: dict[str, TokenRow] = {}
        self._by_hash: dict[str, str] = {}
        self._calls: dict[tuple[str, str], int] = {}  # (token id, protocol) -> calls since start
        self._touched: dict[str, float] = {}  # last use not yet written to the store
        self._closers: dict[str, set[Callable[[], None]]] = {}

    def load(self, rows: list[TokenRow]) -> None:
        for row in rows:
            self.add(row)

    def add(self, row: TokenRow) -> None:
        self._by_id[row.id] = row
        self._by_hash[row.token_hash] = row.id

    def all(self) -> list[TokenRow]:
        return sorted(self._by_id.values(), key=lambda r: (r.created_at, r.id))

    def get(self, token_id: str) -> TokenRow | None:
        return self._by_id.get(token_id)

    def named(self, name: str) -> TokenRow | None:
        return next((r for r in self._by_id.values() if r.name == name), None)

    def by_token(self, token: str) -> TokenRow | None:
        wanted = token_hash(token)
        token_id = self._by_hash.get(wanted)
        row = self._by_id.get(token_id) if token_id is not None else None
        if row is None or not hmac.compare_digest(row.token_hash, wanted):
            return None
        return row

    def authorize(self, authorization: str | None, scope: Scope | None) -> TokenRow:
        """The token of an `Authorization: Bearer <token>` header, when it has `scope` (None:
        any valid token, as /mcp checks each tool's scope when it is called)."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "send an API token (Authorization: Bearer <token>); make one "
                               "on the dashboard or with POST /api/tokens")
        row = self.by_token(token.strip())
        if row is None:
            raise Refused(401, "the API token is unknown or revoked")
        if scope is not None and scope not in row.scopes:
            raise Refused(403, f"the token {row.name!r} lacks the `{scope}` scope "
                               f"(it has: {', '.join(row.scopes) or 'none'})")
        return row

    def remove(self, token_id: str) -> TokenRow | None:
        """Forget a revoked token and end what it has open."""
        row = self._by_id.pop(token_id, None)
        if row is None:
            return None
        self._by_hash.pop(row.token_hash, None)
        self._touched.pop(token_id, None)
        for close in list(self._closers.pop(token_id, ())):
            close()
        return row

    def used(self, token_id: str, protocol: Protocol, now: float) -> None:
        self._calls[(token_id, protocol)] = self._calls.get((token_id, protocol), 0) + 1
        self._touched[token_id] = now
        row = self._by_id.get(token_id)
        if row is not None:
            self._by_id[token_id] = msgspec.structs.replace(row, last_used_at=now)

    def calls(self, token_id: str) -> dict[str, int]:
        return {p: self._calls.get((token_id, p), 0) for p in PROTOCOLS}

    def take_touched(self) -> tuple[tuple[str, float], ...]:
        """Last uses not yet written to the store, cleared."""
        touched, self._touched = tuple(self._touched.items()), {}
        return touched

    def watch(self, token_id: str, close: Callable[[], None]) -> Callable[[], None]:
        """Call `close` when the token is revoked; returns what stops watching."""
        closers = self._closers.setdefault(token_id, set())
        closers.add(close)

        def unwatch() -> None:
            closers.discard(close)
            if not closers and self._closers.get(token_id) is closers:
                del self._closers[token_id]

        return unwatch

    def open_count(self, token_id: str) -> int:
        """MCP sessions and chat streams the token has open."""
        return len(self._closers.get(token_id, ()))
