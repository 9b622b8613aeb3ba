"""The server-sent events parser every streaming provider reads its wire with."""

from __future__ import annotations

import httpx

from chalie.llm.sse import iter_sse, retry_after


def events(text: str) -> list[tuple[str, str]]:
    return list(iter_sse(text.splitlines()))


def test_a_blank_line_ends_each_event() -> None:
    """Two data events come out in order, named "message" when no event line names them."""
    assert events('data: {"a": 1}\n\ndata: [DONE]\n\n') == [
        ("message", '{"a": 1}'), ("message", "[DONE]")]


def test_several_data_lines_are_joined_by_newlines() -> None:
    """One event's data lines make one value, joined by "\\n" as the spec says."""
    assert events("data: first\ndata:second\ndata:  third\n\n") == [
        ("message", "first\nsecond\n third")]


def test_named_events_keep_their_name_until_the_event_ends() -> None:
    """An event: line names only the event it is in (Anthropic's message_start, ...)."""
    assert events("event: message_start\ndata: {}\n\ndata: x\n\n") == [
        ("message_start", "{}"), ("message", "x")]


def test_comments_ids_and_events_without_data_are_skipped() -> None:
    """Keep-alive comments, id/retry lines and a dataless event yield nothing."""
    assert events(": OPENROUTER PROCESSING\n\nid: 7\nretry: 100\n\nevent: ping\n\ndata: y\n\n") == [
        ("message", "y")]


def test_carriage_returns_are_line_endings() -> None:
    """CRLF streams parse like LF ones."""
    assert list(iter_sse(["data: a\r\n", "\r\n", "data: b\r", ""])) == [
        ("message", "a"), ("message", "b")]


def test_data_with_no_closing_blank_line_is_still_given() -> None:
    """A last event cut off before its blank line is handed over; the caller judges it."""
    assert events("data: [DONE]") == [("message", "[DONE]")]


def test_an_unfinished_event_can_be_left_out() -> None:
    """unfinished=False: an event cut off before its blank line is no event (Anthropic's
    stream then counts as broken off)."""
    lines = [": keep-alive", "event: ping", "data: {}", "", "data: a", "data: b", "",
             "event: empty", "", "retry: 5", "event: cut", "data: {\"half"]
    assert list(iter_sse(lines, unfinished=False)) == [("ping", "{}"), ("message", "a\nb")]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    """Delay seconds, or an HTTP-date against the response's Date (else `now`); unreadable is
    None, a past date 0."""
    date = httpx.Headers({"retry-after": "Sun, 01 Jun 2025 12:00:30 GMT",
                          "date": "Sun, 01 Jun 2025 12:00:00 GMT"})
    assert retry_after(date, now=0.0) == 30.0
    now = 1748779200.0  # 2025-06-01 12:00:00 UTC
    assert retry_after(httpx.Headers({"retry-after": "Sun, 01 Jun 2025 11:00:00 GMT"}),
                       now) == 0.0
    assert retry_after(httpx.Headers({"retry-after": " 1.5 "}), now) == 1.5
    assert [retry_after(httpx.Headers({"retry-after": v}), now)
            for v in ("", "soon", "nan")] == [None] * 3
