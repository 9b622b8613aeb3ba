"""What an MCP tool call answered, as the text the model reads.

Text blocks are the answer. Images and audio become a one-line summary (the model gets no
bytes); resources become their uri and mime type, with a text resource's text clipped.
`structuredContent` is given as compact JSON when no text block already says it (servers
built with the SDK usually send both). `isError` makes it an error outcome.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from chalie.tools.base import ToolOutcome, tool_error

RESOURCE_TEXT_CHARS = 2000  # of an embedded text resource; the loop clips the whole result too


def call_outcome(result: types.CallToolResult) -> ToolOutcome:
    text = result_text(result)
    if result.is_error:
        return tool_error(text or "the tool failed without saying why")
    return ToolOutcome(text=text or "(the tool returned no content)")


def result_text(result: types.CallToolResult) -> str:
    parts = [block_text(block) for block in result.content]
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    structured = result.structured_content
    if structured is not None and not _already_said(structured, texts):
        parts.append(compact_json(structured))
    return "\n".join(p for p in parts if p)


def block_text(block: types.ContentBlock) -> str:
    match block:
        case types.TextContent(text=text):
            return text
        case types.ImageContent(data=data, mime_type=mime):
            return f"[image: {mime}, {b64_size(data)} bytes]"
        case types.AudioContent(data=data, mime_type=mime):
            return f"[audio: {mime}, {b64_size(data)} bytes]"
        case types.ResourceLink():
            described = f": {block.description}" if block.description else ""
            mime = block.mime_type or "unknown type"
            return f"[resource link: {block.uri}, {mime}, {block.name}{described}]"
        case types.EmbeddedResource(resource=types.TextResourceContents() as res):
            return f"[resource: {res.uri}, {res.mime_type or 'text'}]\n{clip(res.text)}"
        case types.EmbeddedResource(resource=types.BlobResourceContents() as res):
            mime = res.mime_type or "binary"
            return f"[resource: {res.uri}, {mime}, {b64_size(res.blob)} bytes]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def b64_size(data: str) -> int:
    """Bytes that base64 `data` decodes to, without decoding it."""
    data = data.strip()
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def clip(text: str, limit: int = RESOURCE_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _already_said(structured: Any, texts: list[str]) -> bool:
    """Whether a text block carries the structured content: as its JSON, or as the plain value
    the SDK's servers wrap as {"result": value}."""
    for text in texts:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        if structured in (parsed, {"result": parsed}, {"result": text}):
            return True
    return False
