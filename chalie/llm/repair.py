"""Tool calling that survives small models.

Small local models get tool calls almost right: arguments in a Markdown fence, a sentence around
the object, a trailing comma, Python's quotes and literals, a call written as the answer's text
because the server has no native tool calling. Sending "error: not valid JSON" back costs a whole
round trip and often gets the same mistake again, so what can be read unambiguously is read here:

- `repair_arguments` turns what a model sent as arguments into a JSON object, or says why not.
  Nothing is ever evaluated; one linear pass rewrites the JSON-ish text, bounded in length.
- `calls_in_text` finds calls written as text (bare or fenced JSON, Hermes/Qwen `<tool_call>`
  tags, Mistral's `[TOOL_CALLS]`), counting only the names of tools the request offered, so a
  JSON answer stays an answer.
- `normalise` applies both to every provider answer.

All of it is pure functions. The provider wrapper that gives a model configured `tools = false`
its tools in the system prompt, and streams its answer without showing a call, is
chalie/llm/prompted.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec
import structlog

from chalie.llm.types import ChatRequest, ChatResponse, ToolCall

log = structlog.get_logger("chalie.llm")

MAX_CHARS = 100_000  # longer arguments or answers are not repaired: no real call is that long

_LITERALS = {"True": "true", "False": "false", "None": "null"}
_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SPACE = " \t\r\n"
_OPENER = re.compile(r"[\[{]")
_NAME_KEYS = ("name", "tool", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")
_CALL_EXTRAS = frozenset({"id", "type"})  # OpenAI's call id and "type": "function"
_MAX_UNCLOSED = 4  # brackets in prose that never close; past this the rest is not searched
_FAILED = object()


def repair_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None, bool]:
    """Arguments as the model sent them -> (args, None, repaired) or (None, why, False).

    A strict JSON object (or an empty string, meaning no arguments) is taken as it is
    (`repaired` False); otherwise the repairs are tried, and `repaired` says one was needed."""
    args, error, kinds = _repair(raw)
    return args, error, bool(kinds)


def calls_in_text(text: str, tools: Sequence[str]) -> tuple[tuple[ToolCall, ...], str] | None:
    """The tool calls written in an answer's text, and the text without them (stripped).

    None when the text holds no call to one of `tools`: a JSON object naming another tool, or
    none, is part of the answer. A JSON value that holds a call (an answer quoting one) is not
    searched inside."""
    if not tools or len(text) > MAX_CHARS:
        return None
    known = frozenset(tools)
    found: list[ToolCall] = []
    kept: list[str] = []
    copied = 0  # text[:copied] is in `kept` or removed
    i, unclosed = 0, 0
    while (opener := _OPENER.search(text, i)) is not None:
        start = opener.start()
        scanned = _scan(text, start)
        if scanned is None:
            unclosed += 1
            if unclosed > _MAX_UNCLOSED:
                break
            i = start + 1
            continue
        json_text, end, _ = scanned
        calls = _as_calls(json_text, known)
        if calls is not None:
            cut_from, cut_to = _wrapping(text, start, end)
            kept.append(text[copied:cut_from])
            copied = cut_to
            found.extend(calls)
        i = end + 1
    if not found:
        return None
    kept.append(text[copied:])
    numbered = tuple(msgspec.structs.replace(c, call_id=f"text_call_{n}")
                     for n, c in enumerate(found))
    return numbered, "".join(kept).strip()


def normalise(response: ChatResponse, request: ChatRequest) -> ChatResponse:
    """`response` with repairable tool-call arguments repaired and, when the request offered
    tools and none were called natively, the calls written in its text made tool calls.

    The same object comes back when nothing needed changing."""
    calls = tuple(_repaired_call(c) for c in response.tool_calls)
    changed = any(new is not old for new, old in zip(calls, response.tool_calls, strict=True))
    text, finish_reason = response.text, response.finish_reason
    if request.tools and not calls:
        found = calls_in_text(response.text, [t.name for t in request.tools])
        if found is not None:
            calls, text = found
            finish_reason, changed = "tool_calls", True
            for call in calls:
                log.info("tool_call_repaired", kind="text_call", tool=call.name)
    if not changed:
        return response
    return msgspec.structs.replace(response, text=text, tool_calls=calls,
                                   finish_reason=finish_reason)


# --- repair -------------------------------------------------------------------------------------

def _repair(raw: str, *, unwrap: bool = True) -> tuple[dict[str, Any] | None, str | None,
                                                       tuple[str, ...]]:
    """(args, error, the repairs made, by kind); no kinds for arguments that needed none."""
    body = raw.strip()
    if not body:
        return {}, None, ()
    value, strict_error = _decode(body)
    if strict_error is None:
        if isinstance(value, dict):
            return value, None, ()
        if isinstance(value, str) and unwrap:  # double-encoded: "{\"city\": \"Paris\"}"
            args, error, kinds = _repair(value, unwrap=False)
            if args is None:
                return None, f"arguments are a JSON string, not an object ({error})", ()
            return args, None, ("double_encoded", *kinds)
        return None, f"arguments must be a JSON object, got {_json_type(value)}", ()
    if len(body) > MAX_CHARS:
        return None, (f"arguments are not valid JSON and too long to repair ({len(body)} "
                      f"characters, at most {MAX_CHARS})"), ()
    start = body.find("{")
    if start < 0:
        return None, f"arguments hold no JSON object ({strict_error})", ()
    scanned = _scan(body, start)
    if scanned is None:
        return None, "the arguments' JSON object is never closed (were they cut off?)", ()
    json_text, end, made = scanned
    value, error = _decode(json_text)
    if error is not None or not isinstance(value, dict):
        return None, f"arguments are not valid JSON, even repaired ({strict_error})", ()
    if "```" in body[:start]:
        made |= {"fence"}
    elif body[:start].strip() or body[end + 1:].strip():
        made |= {"prose"}
    return value, None, tuple(sorted(made))


def _decode(text: str) -> tuple[Any, str | None]:
    """(value, None), or (_FAILED, why) for text that is not one JSON value."""
    try:
        return msgspec.json.decode(text), None
    except msgspec.DecodeError as e:
        return _FAILED, str(e)
    except UnicodeEncodeError:
        return _FAILED, "it holds characters that are not valid Unicode"
    except RecursionError:
        return _FAILED, "it is nested too deeply"


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _scan(text: str, start: int) -> tuple[str, int, frozenset[str]] | None:
    """The JSON-ish value opening at `text[start]` (`{` or `[`) rewritten as JSON, the index of
    its closing bracket, and the repairs made; None when it never closes.

    One pass, each character visited once: single-quoted strings become double-quoted, raw
    newlines and tabs inside strings are escaped, Python's True/False/None become JSON
    literals, bare keys are quoted and trailing commas dropped. Double-quoted strings are copied
    as they are, so an apostrophe or a "True" inside one is never touched."""
    out: list[str] = []
    kinds: set[str] = set()
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i = _string(text, i, out, kinds)
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            while out and out[-1] in _SPACE:
                out.pop()
            if out and out[-1] == ",":
                out.pop()
                kinds.add("trailing_comma")
            depth -= 1
            if depth == 0:
                out.append(ch)
                return "".join(out), i, frozenset(kinds)
        elif ch.isalpha() or ch == "_":
            end = i + 1
            while end < n and (text[end].isalnum() or text[end] == "_"):
                end += 1
            word, after = text[i:end], end
            while after < n and text[after] in _SPACE:
                after += 1
            if after < n and text[after] == ":":
                out.append(f'"{word}"')
                kinds.add("unquoted_key")
            elif word in _LITERALS:
                out.append(_LITERALS[word])
                kinds.add("python_literal")
            else:
                out.append(word)
            i = end
            continue
        out.append(ch)
        i += 1
    return None


def _string(text: str, i: int, out: list[str], kinds: set[str]) -> int:
    """Copy the string whose quote is at `text[i]` to `out` as a JSON string; the index after
    its closing quote, or len(text) when it never closes (and nothing is copied)."""
    quote, n = text[i], len(text)
    parts = ['"']
    j = i + 1
    while j < n:
        ch = text[j]
        if ch == "\\":
            if j + 1 >= n:
                break
            escaped = text[j + 1]
            parts.append("'" if quote == "'" and escaped == "'" else ch + escaped)
            j += 2
            continue
        if ch == quote:
            parts.append('"')
            out.append("".join(parts))
            if quote == "'":
                kinds.add("single_quotes")
            return j + 1
        if ch == '"':  # inside a single-quoted string
            parts.append('\\"')
        elif ch in _CONTROL:
            parts.append(_CONTROL[ch])
            kinds.add("control_character")
        else:
            parts.append(ch)
        j += 1
    return n


def _repaired_call(call: ToolCall) -> ToolCall:
    """`call` with its arguments repaired, if they were unusable and can be; else `call`."""
    if call.args_error is None:
        return call
    args, _, kinds = _repair(call.raw_args)
    if args is None:
        return call
    log.info("tool_call_repaired", kind="+".join(kinds) or "reparsed", tool=call.name)
    return msgspec.structs.replace(call, args=args, args_error=None,
                                   raw_args=msgspec.json.encode(args).decode())


# --- calls written as text ----------------------------------------------------------------------

def _as_calls(json_text: str, known: frozenset[str]) -> list[ToolCall] | None:
    """The calls a JSON object (or array of them) stands for; None unless every one is a call
    to a known tool."""
    value, error = _decode(json_text)
    if error is not None:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(item, known) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _as_call(item: Any, known: frozenset[str]) -> ToolCall | None:
    """One call: {"name"|"tool"|"function": NAME, "arguments"|"args"|"parameters"|"input": ARGS}
    or OpenAI's {"type": "function", "function": {"name": ..., "arguments": ...}}. An object
    with other keys is an answer that happens to hold a name, not a call."""
    if not isinstance(item, dict):
        return None
    inner = item.get("function")
    if isinstance(inner, dict):
        if set(item) - {"function"} - _CALL_EXTRAS:
            return None
        item = inner
    name_keys = [k for k in _NAME_KEYS if k in item]
    arg_keys = [k for k in _ARG_KEYS if k in item]
    if len(name_keys) != 1 or len(arg_keys) > 1 or set(item) - {*name_keys, *arg_keys,
                                                                 *_CALL_EXTRAS}:
        return None
    name = item[name_keys[0]]
    if not isinstance(name, str) or name not in known:
        return None
    sent = item[arg_keys[0]] if arg_keys else None
    if sent is None:
        args: dict[str, Any] | None = {}
        error = None
    elif isinstance(sent, dict):
        args, error = sent, None
    elif isinstance(sent, str):
        args, error, _ = repair_arguments(sent)
    else:
        args, error = None, f"arguments must be a JSON object, got {_json_type(sent)}"
    if args is not None:
        raw_args = msgspec.json.encode(args).decode()
    else:
        raw_args = sent if isinstance(sent, str) else msgspec.json.encode(sent).decode()
    return ToolCall(call_id="", name=name, args=args, raw_args=raw_args, args_error=error)


def _wrapping(text: str, start: int, end: int) -> tuple[int, int]:
    """The span to cut for a call at text[start:end + 1]: with the `<tool_call>` tags, the
    `[TOOL_CALLS]` marker or the Markdown fence around it."""
    before = start
    while before > 0 and text[before - 1] in _SPACE:
        before -= 1
    after = end + 1
    while after < len(text) and text[after] in _SPACE:
        after += 1
    if text.endswith("<tool_call>", 0, before):
        closing = "</tool_call>"
        start = before - len("<tool_call>")
    elif text.endswith("[TOOL_CALLS]", 0, before):
        return before - len("[TOOL_CALLS]"), end + 1
    else:
        tag = before
        while tag > 0 and (text[tag - 1].isalnum() or text[tag - 1] in "_-"):
            tag -= 1  # a fence's language: ```json
        if not text.endswith("```", 0, tag):
            return start, end + 1
        closing = "```"
        start = tag - 3
    if text.startswith(closing, after):
        return start, after + len(closing)
    return start, end + 1
