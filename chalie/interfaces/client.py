"""Calls to a paired interface: GET /health, GET /capabilities, POST /execute and GET /.

One httpx.Client, made by the server with redirects off, carries every call; each request sets
its own timeouts: `connect_timeout_s` to connect, then `health_timeout_s` (health, capabilities,
the UI) or `execute_timeout_s` (a tool call) for the answer, which must also arrive whole within
connect + answer time. An answer is read as a stream and given up past `max_response_bytes`.
Whatever goes wrong (no connection, a timeout, a status other than 2xx, a body that is not JSON
or not of the contract's shape) is an InterfaceError naming the request and what failed:
"GET http://127.0.0.1:9001/health: connection refused".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import msgspec

from chalie.interfaces.blocks import Block, check_blocks
from chalie.interfaces.capabilities import (
    Capabilities,
    Health,
    capabilities_from_json,
    decode_json,
    health_from_json,
)
from chalie.interfaces.errors import InterfaceError, shown

_ERROR_BODY_CHARS = 200  # how much of an error status's body its message quotes

T = TypeVar("T")


class ExecuteResult(msgspec.Struct, frozen=True):
    """POST /execute's answer. `data` is any JSON value; `blocks` are checked (normal form);
    `open_url` is the answer's `openUrl` as sent (the caller decides whether to follow it)."""

    text: str | None = None
    data: Any = None
    error: str | None = None
    blocks: tuple[Block, ...] | None = None
    open_url: str | None = None


def execute_result_from_json(value: Any) -> ExecuteResult:
    """A decoded /execute answer -> ExecuteResult, or InterfaceError naming the field."""
    if not isinstance(value, dict):
        raise InterfaceError(f"must be a JSON object, got {shown(value)}")
    fields: dict[str, str | None] = {}
    for key in ("text", "error", "openUrl"):
        field = value.get(key)
        if field is not None and not isinstance(field, str):
            raise InterfaceError(f"{key}: must be a string or null, got {shown(field)}")
        fields[key] = field
    raw_blocks = value.get("blocks")
    blocks = None if raw_blocks is None else tuple(check_blocks(raw_blocks))
    return ExecuteResult(text=fields["text"], data=value.get("data"), error=fields["error"],
                         blocks=blocks, open_url=fields["openUrl"])


def base_url(host: str, port: int) -> str:
    """http://host:port, with an IPv6 address in brackets."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


class InterfaceClient:
    def __init__(self, http: httpx.Client, *, health_timeout_s: float, connect_timeout_s: float,
                 execute_timeout_s: float, max_response_bytes: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._http = http
        self._monotonic = monotonic  # tests pass their own to see a slow answer cut off
        self._health_s = health_timeout_s
        self._connect_s = connect_timeout_s
        self._execute_s = execute_timeout_s
        self._max_bytes = max_response_bytes

    def health(self, host: str, port: int) -> Health:
        """GET /health; its status must be "ok"."""
        return self._checked("GET", base_url(host, port) + "/health", self._health_s,
                             health_from_json)

    def capabilities(self, host: str, port: int) -> Capabilities:
        """GET /capabilities, checked (see capabilities.py): its tools and declared signal
        types."""
        return self._checked("GET", base_url(host, port) + "/capabilities", self._health_s,
                             capabilities_from_json)

    def execute(self, host: str, port: int, capability: str,
                params: dict[str, Any]) -> ExecuteResult:
        """POST /execute {capability, params}. An answer with `error` set is a result, not an
        InterfaceError: the interface answered, and said the call failed."""
        try:
            body = msgspec.json.encode({"capability": capability, "params": params})
        except (TypeError, msgspec.EncodeError) as e:
            raise InterfaceError(f"params: cannot be sent as JSON ({e})") from None
        return self._checked("POST", base_url(host, port) + "/execute", self._execute_s,
                             execute_result_from_json, body=body)

    def render(self, host: str, port: int) -> list[Block]:
        """GET /: the interface's own UI as blocks in normal form (see blocks.py)."""
        return self._checked("GET", base_url(host, port) + "/", self._health_s, check_blocks)

    # -- one request --

    def _checked(self, method: str, url: str, read_s: float, check: Callable[[Any], T], *,
                 body: bytes | None = None) -> T:
        """One request whose JSON answer `check` turns into a result; its InterfaceError is
        prefixed with the request."""
        where = f"{method} {url}"
        raw = self._fetch(method, url, read_s, body)
        value = decode_json(raw, where)
        try:
            return check(value)
        except InterfaceError as e:
            raise InterfaceError(f"{where}: {e}") from None

    def _fetch(self, method: str, url: str, read_s: float, body: bytes | None) -> bytes:
        where = f"{method} {url}"
        timeout = httpx.Timeout(read_s, connect=self._connect_s)
        deadline = self._monotonic() + self._connect_s + read_s
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            with self._http.stream(method, url, content=body, headers=headers,
                                   timeout=timeout) as response:
                if not 200 <= response.status_code < 300:
                    raise InterfaceError(f"{where}: {_status_problem(response)}")
                return self._read(response, where, read_s, deadline)
        except httpx.ConnectTimeout:
            raise InterfaceError(
                f"{where}: could not connect within {self._connect_s:g}s") from None
        except httpx.TimeoutException:
            raise InterfaceError(f"{where}: timed out after {read_s:g}s") from None
        except httpx.ConnectError as e:
            problem = "connection refused" if "refused" in str(e).lower() else \
                f"could not connect ({e or type(e).__name__})"
            raise InterfaceError(f"{where}: {problem}") from None
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise InterfaceError(f"{where}: {type(e).__name__}: {e}") from None

    def _read(self, response: httpx.Response, where: str, read_s: float,
              deadline: float) -> bytes:
        too_big = f"{where}: answer larger than {self._max_bytes} bytes"
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise InterfaceError(too_big)
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise InterfaceError(too_big)
            if self._monotonic() > deadline:
                raise InterfaceError(f"{where}: timed out after {read_s:g}s")
            chunks.append(chunk)
        return b"".join(chunks)


def _status_problem(response: httpx.Response) -> str:
    """ "answered HTTP 500: <the start of its body>" """
    problem = f"answered HTTP {response.status_code}"
    if 300 <= response.status_code < 400:
        return f"{problem} (a redirect; redirects are not followed)"
    start = b""
    for chunk in response.iter_bytes():
        start += chunk
        if len(start) >= _ERROR_BODY_CHARS:
            break
    text = " ".join(start.decode("utf-8", "replace").split())[:_ERROR_BODY_CHARS]
    return f"{problem}: {text}" if text else problem
