"""What the HTTP wire formats share: server-sent events (the WHATWG `text/event-stream`
format), parsed from lines, the time limits of a stream, and the Retry-After header.

Streaming LLM APIs speak it: OpenAI-compatible servers send `data: {json}` events ending with
`data: [DONE]`, Anthropic names its events with `event:` lines. The parser is generic and
small so every provider reads the wire the same way; it takes already split lines (httpx's
`iter_lines`) so it never buffers more than one event.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from email.utils import parsedate_to_datetime

import httpx

from chalie.errors import LlmUnavailable


def iter_sse(lines: Iterable[str], *, unfinished: bool = True) -> Iterator[tuple[str, str]]:
    """(event, data) per event in `lines`. The event type is "message" unless an `event:`
    line named it; several `data:` lines are joined by "\\n"; a blank line ends an event;
    `:` comment lines (keep-alives such as OpenRouter's ": OPENROUTER PROCESSING") and `id:`
    and `retry:` lines are skipped. An event without data is not dispatched, as the spec says.
    Trailing data with no blank line after it (a server that closes right after its last
    event) is dispatched too, unless `unfinished` is False (then, as the WHATWG spec says,
    it is no event): either way a stream that broke off is for the caller to judge."""
    event = ""
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
    if data and unfinished:
        yield event or "message", "\n".join(data)


def stream_timeout(timeout_s: float, stall_s: float) -> httpx.Timeout:
    """The time limits of a streamed request: `timeout_s` in all, at most 10 s of it to
    connect, and at most `stall_s` (llm.stall_timeout_s) without a byte from the server, before
    its headers or between two pieces of the stream. httpx's read timeout restarts with every
    read, so a server that keeps sending (keep-alive comments included) is bounded by the
    overall deadline instead, which `within` checks line by line."""
    return httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0), read=min(timeout_s, stall_s))


def stalled(timeout_s: float, stall_s: float) -> LlmUnavailable:
    """What a read timeout of a stream (`stream_timeout`) means: a stall, or, when the whole
    budget was shorter than the stall limit, the budget spent."""
    if stall_s < timeout_s:
        return LlmUnavailable(f"the stream stalled: the server sent nothing for {stall_s:g}s")
    return LlmUnavailable(f"timed out after {timeout_s:g}s while the answer was streaming")


def within(lines: Iterable[str], deadline: float, now: Callable[[], float],
           late: Callable[[], Exception]) -> Iterator[str]:
    """`lines` until `now()` passes `deadline`; then `late()` is raised. A server that sends
    keep-alives and never an answer would otherwise hold the caller (and its worker) for
    ever: httpx's read timeout only sees silence."""
    for line in lines:
        if now() > deadline:
            raise late()
        yield line


def retry_after(headers: httpx.Headers, now: float) -> float | None:
    """Seconds the server asks us to wait (Retry-After: delta-seconds or an HTTP-date), or
    None. A date is measured against the response's own Date header when it has one, so a
    skewed local clock does not stretch or cancel the wait; else against `now` (epoch
    seconds). A date in the past is 0: ask again at once."""
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        when = _http_date(value)
        if when is None:
            return None
        sent = _http_date(headers.get("date", ""))
        seconds = when - (sent if sent is not None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _http_date(value: str) -> float | None:
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
