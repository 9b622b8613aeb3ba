"""JSON request/response helpers: errors are JSON bodies that name the problem."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
import tornado.web

from chalie.edge.context import EdgeContext

T = TypeVar("T")
_AT = re.compile(r" - at `\$\.?([^`]*)`")


class JsonHandler(tornado.web.RequestHandler):
    def initialize(self, ctx: EdgeContext) -> None:
        self.ctx = ctx

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")

    def decode_body(self, kind: type[T]) -> T:
        try:
            return msgspec.json.decode(self.request.body, type=kind)
        except msgspec.ValidationError as e:
            found = _AT.search(str(e))
            field = found.group(1) if found else ""
            raise tornado.web.HTTPError(
                400, reason=f"{field or 'body'}: {_AT.sub('', str(e))}"
            ) from None
        except msgspec.DecodeError as e:
            raise tornado.web.HTTPError(400, reason=f"body is not valid JSON: {e}") from None

    def write_json(self, value: Any) -> None:
        self.write(msgspec.json.encode(value))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(msgspec.json.encode({"error": self._reason, "status": status_code}))
