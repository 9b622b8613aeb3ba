"""What Chalie's OpenAI-compatible endpoints (/v1/) share: a scoped API token with `chat`, and
every error in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so OpenAI's
SDKs raise the error class that fits (401 AuthenticationError, 400 BadRequestError, ...).

The refusals of `JsonHandler.prepare` (413, 403 cross-site, 429 past the REST rate, where a
wrong token also counts against its address) come out in that shape too. Each request counts
in chalie_api_calls by token and result, and in the token's calls (GET /api/tokens).
"""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.edge.openai_wire import ErrorDetail, OpenAiError, OpenAiFault
from chalie.edge.rest_base import ApiError, JsonHandler
from chalie.edge.tokens import Refused, TokenBoard
from chalie.store.token_rows import TokenRow

# status -> (OpenAI's error type, its code), for an error that names neither.
KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "insufficient_scope"),
    404: ("invalid_request_error", "not_found"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def error_body(status: int, message: str, *, kind: str | None = None, param: str | None = None,
               code: str | None = None) -> OpenAiError:
    default_kind, default_code = KINDS.get(status, ("server_error", None))
    return OpenAiError(ErrorDetail(message, kind or default_kind, param,
                                   code if code is not None else default_code))


def fault_body(fault: OpenAiFault) -> OpenAiError:
    return error_body(fault.status_code, fault.message, kind=fault.kind, param=fault.param,
                      code=fault.code)


class OpenAiHandler(JsonHandler):
    """A /v1/ endpoint: `self.token` once `authorize` let the request in."""

    token: TokenRow | None = None
    outcome: str | None = None  # the result counted; None: from the status

    def authorize(self) -> TokenRow:
        board = self.board()
        try:
            self.token = board.authorize(self.request.headers.get("Authorization"), "chat")
        except Refused as e:
            raise OpenAiFault(e.status, e.message, kind=KINDS[e.status][0],
                              code=KINDS[e.status][1]) from None
        board.used(self.token.id, "openai", self.ctx.clock.time())
        return self.token

    def board(self) -> TokenBoard:
        board = self.ctx.tokens
        if board is None:
            raise OpenAiFault(503, "API tokens are not available on this server",
                              kind="server_error")
        return board

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc_info = kwargs.get("exc_info")
        error = exc_info[1] if exc_info is not None else None
        if isinstance(error, OpenAiFault):
            body, headers = fault_body(error), error.headers
        elif isinstance(error, ApiError):
            body, headers = error_body(status_code, error.message), error.headers
        else:
            body, headers = error_body(status_code, self._reason), {}
        for name, value in headers.items():
            self.set_header(name, value)
        self.set_header("Content-Type", "application/json")
        self.finish(msgspec.json.encode(body))

    def on_finish(self) -> None:
        super().on_finish()
        status = self.get_status()
        result = self.outcome or ("ok" if status < 400 else
                                  "refused" if status in (401, 403, 429) else "error")
        name = self.token.name if self.token is not None else "unknown"
        self.ctx.metrics.api_calls.labels(token=name, protocol="openai", result=result).inc()
