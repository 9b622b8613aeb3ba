"""Blocks: the UI structure an interface answers (never HTML), checked, and rendered by Chalie.

An interface's GET / and the `blocks` of its POST /execute answer are a Block[]: JSON objects
with a `type`. The vocabulary:

    text      {text}                          a paragraph (line breaks kept)
    heading   {text, level?: 1|2|3}           level 1 when left out
    list      {items: [str], ordered?: bool}  numbers and booleans in `items` are written as text
    keyvalue  {items: [{key, value}]}         value: string, number, boolean or null
    table     {columns: [str], rows: [[str|number|boolean|null]]}  every row has a cell a column
    image     {url, alt?}
    link      {url, text?}                    text is the url when left out
    button    {label, url}                    a link that looks like a button; no script, no form
    divider   {}
    code      {text}                          preformatted
    section   {title?, blocks: [Block]}       sections nest at most 4 deep

Limits: 200 blocks in all (those inside sections count), 500 items or rows in one block, 20
columns; a string longer than 10,000 characters is cut and ends with an ellipsis. A block of
another type becomes a text block of its `text` field, or is left out when it has none: newer
interfaces may know types this Chalie does not. A url that is not http(s) is never linked: a
link or button becomes text, an image its alt text (or nothing). Anything else that does not
fit (a missing field, a heading of level 7) is an InterfaceError naming the place.

`check_blocks` returns the blocks as plain JSON values in that normal form; the gateway hands
them to the app as they are. `render_card` turns them into a card's HTML, every string from the
interface escaped with html.escape(quote=True), with a small stylesheet of Chalie's own scoped
to the card.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import urlsplit

from chalie.interfaces.capabilities import decode_json
from chalie.interfaces.errors import InterfaceError, shown

MAX_BLOCKS = 200
MAX_DEPTH = 4
MAX_ITEMS = 500
MAX_COLUMNS = 20
MAX_TEXT = 10_000
MAX_URL = 2048
DEFAULT_ACCENT = "#4f6bed"

_COLOR_RE = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})")
_SCOPE_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_URL_BAD_RE = re.compile(r"[\x00-\x20\x7f]")

Block = dict[str, Any]


def gateway_view(raw: bytes) -> list[Block]:
    """An interface's GET / body -> its blocks in normal form, or InterfaceError."""
    return check_blocks(decode_json(raw, "blocks"))


def check_blocks(value: Any, where: str = "blocks") -> list[Block]:
    """A decoded Block[] -> the same blocks in normal form (see the module docstring)."""
    return _Checker().blocks(value, where, 1)


def safe_url(value: Any) -> str | None:
    """`value` when it is an http(s) URL with a host and no spaces or control characters."""
    if not isinstance(value, str) or len(value) > MAX_URL or _URL_BAD_RE.search(value):
        return None
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:  # a malformed IPv6 literal or port
        return None
    return value if parts.scheme.lower() in ("http", "https") and host else None


def valid_accent(value: str | None) -> str:
    """`value` when it is a #rgb or #rrggbb color, else Chalie's own accent."""
    return value if value is not None and _COLOR_RE.fullmatch(value) else DEFAULT_ACCENT


def render_card(blocks: Sequence[Block], *, tool_name: str, title: str, accent_color: str,
                scope_id: str) -> tuple[str, str]:
    """Blocks -> (html, css) of a card. Checks the blocks again (InterfaceError if they do not
    pass); `scope_id` is Chalie's own (letters, digits, '_', '-'), else ValueError."""
    if not _SCOPE_RE.fullmatch(scope_id):
        raise ValueError(f"scope_id: letters, digits, '_' or '-', got {scope_id!r}")
    body = "".join(_render(b) for b in check_blocks(list(blocks)))
    head = (f'<div class="chalie-card-head"><span class="chalie-card-title">{_e(title)}</span>'
            f'<span class="chalie-card-tool">{_e(tool_name)}</span></div>')
    html = (f'<div class="chalie-card chalie-card-{scope_id}">{head}'
            f'<div class="chalie-card-body">{body}</div></div>')
    css = (_CSS.replace("SCOPE", f".chalie-card-{scope_id}")
           .replace("ACCENT", valid_accent(accent_color)))
    return html, css


# --- checks -------------------------------------------------------------------------------------

class _Checker:
    """One pass over a Block[]; counts every block it meets against MAX_BLOCKS."""

    def __init__(self) -> None:
        self.count = 0

    def blocks(self, value: Any, where: str, depth: int) -> list[Block]:
        if not isinstance(value, (list, tuple)):
            raise InterfaceError(f"{where}: must be an array of blocks, got {shown(value)}")
        out = []
        for i, item in enumerate(value):
            block = self.block(item, f"{where}[{i}]", depth)
            if block is not None:
                out.append(block)
        return out

    def block(self, value: Any, where: str, depth: int) -> Block | None:
        self.count += 1
        if self.count > MAX_BLOCKS:
            raise InterfaceError(f"{where}: at most {MAX_BLOCKS} blocks in all "
                                 "(those inside sections count)")
        if not isinstance(value, dict):
            raise InterfaceError(f"{where}: must be a block object, got {shown(value)}")
        kind = value.get("type")
        if not isinstance(kind, str):
            raise InterfaceError(f"{where}.type: must be a string, got {shown(kind)}")
        match kind:
            case "text" | "code":
                return {"type": kind, "text": _str(value, "text", where)}
            case "heading":
                level = value.get("level", 1)
                if type(level) is not int or level not in (1, 2, 3):
                    raise InterfaceError(f"{where}.level: must be 1, 2 or 3, got {shown(level)}")
                return {"type": "heading", "text": _str(value, "text", where), "level": level}
            case "list":
                items = [_scalar_text(v, f"{where}.items[{j}]")
                         for j, v in enumerate(_array(value, "items", where))]
                ordered = value.get("ordered", False)
                if not isinstance(ordered, bool):
                    raise InterfaceError(f"{where}.ordered: must be true or false")
                return {"type": "list", "items": items, "ordered": ordered}
            case "keyvalue":
                pairs = []
                for j, pair in enumerate(_array(value, "items", where)):
                    at = f"{where}.items[{j}]"
                    if not isinstance(pair, dict):
                        raise InterfaceError(f"{at}: must be an object with key and value")
                    pairs.append({"key": _str(pair, "key", at),
                                  "value": _cell(pair.get("value"), f"{at}.value")})
                return {"type": "keyvalue", "items": pairs}
            case "table":
                return _table(value, where)
            case "image" | "link" | "button":
                return _linked(kind, value, where)
            case "divider":
                return {"type": "divider"}
            case "section":
                if depth > MAX_DEPTH:
                    raise InterfaceError(f"{where}: sections nest at most {MAX_DEPTH} deep")
                title = value.get("title")
                if title is not None and not isinstance(title, str):
                    raise InterfaceError(f"{where}.title: must be a string, got {shown(title)}")
                inner = self.blocks(value.get("blocks"), f"{where}.blocks", depth + 1)
                return {"type": "section", "title": _clip(title) if title else None,
                        "blocks": inner}
            case _:  # a type this Chalie does not know: its text, if it has one
                text = value.get("text")
                return {"type": "text", "text": _clip(text)} if isinstance(text, str) else None


def _table(value: Block, where: str) -> Block:
    columns = [_scalar_text(c, f"{where}.columns[{j}]")
               for j, c in enumerate(_array(value, "columns", where))]
    if len(columns) > MAX_COLUMNS:
        raise InterfaceError(f"{where}.columns: at most {MAX_COLUMNS}, got {len(columns)}")
    rows = []
    for j, row in enumerate(_array(value, "rows", where)):
        if not isinstance(row, list) or len(row) != len(columns):
            raise InterfaceError(f"{where}.rows[{j}]: must be an array of {len(columns)} cells, "
                                 f"one a column, got {shown(row)}")
        rows.append([_cell(c, f"{where}.rows[{j}][{k}]") for k, c in enumerate(row)])
    return {"type": "table", "columns": columns, "rows": rows}


def _linked(kind: str, value: Block, where: str) -> Block | None:
    """image, link and button; one whose url is not http(s) becomes text, or nothing."""
    raw_url = value.get("url")
    if not isinstance(raw_url, str):
        raise InterfaceError(f"{where}.url: must be a string, got {shown(raw_url)}")
    url = safe_url(raw_url)
    if kind == "image":
        alt = _str(value, "alt", where, default="")
        if url is None:
            return {"type": "text", "text": alt} if alt else None
        return {"type": "image", "url": url, "alt": alt}
    key = "label" if kind == "button" else "text"
    text = _str(value, key, where, default=None if kind == "button" else _clip(raw_url))
    if url is None:
        return {"type": "text", "text": text}
    return {"type": kind, "url": url, key: text}


def _str(body: Block, key: str, where: str, default: str | None = None) -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise InterfaceError(f"{where}.{key}: must be a string, got {shown(value)}")
    return _clip(value)


def _array(body: Block, key: str, where: str) -> list[Any]:
    value = body.get(key)
    if not isinstance(value, list):
        raise InterfaceError(f"{where}.{key}: must be an array, got {shown(value)}")
    if len(value) > MAX_ITEMS:
        raise InterfaceError(f"{where}.{key}: at most {MAX_ITEMS}, got {len(value)}")
    return value


def _cell(value: Any, where: str) -> str | int | float | bool | None:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _clip(value)
    raise InterfaceError(f"{where}: must be a string, number, boolean or null, got {shown(value)}")


def _scalar_text(value: Any, where: str) -> str:
    if value is None or isinstance(value, (dict, list)):
        raise InterfaceError(f"{where}: must be a string, got {shown(value)}")
    return _cell_text(_cell(value, where))


def _cell_text(value: str | int | float | bool | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


# --- rendering ----------------------------------------------------------------------------------

def _e(text: str) -> str:
    return escape(_clip(text), quote=True)


def _render(b: Block) -> str:
    match b["type"]:
        case "text":
            return f"<p>{_e(b['text'])}</p>"
        case "heading":
            n = b["level"] + 2  # h3-h5: a card sits inside a page that has its own h1
            return f"<h{n}>{_e(b['text'])}</h{n}>"
        case "list":
            tag = "ol" if b["ordered"] else "ul"
            return f"<{tag}>{''.join(f'<li>{_e(i)}</li>' for i in b['items'])}</{tag}>"
        case "keyvalue":
            pairs = "".join(f"<dt>{_e(p['key'])}</dt><dd>{_e(_cell_text(p['value']))}</dd>"
                            for p in b["items"])
            return f"<dl>{pairs}</dl>"
        case "table":
            head = "".join(f"<th>{_e(c)}</th>" for c in b["columns"])
            rows = "".join("<tr>" + "".join(f"<td>{_e(_cell_text(c))}</td>" for c in row)
                           + "</tr>" for row in b["rows"])
            return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
        case "image":
            return (f'<img src="{_e(b["url"])}" alt="{_e(b["alt"])}" loading="lazy" '
                    'referrerpolicy="no-referrer">')
        case "link" | "button":
            label = b["label"] if b["type"] == "button" else b["text"]
            css = ' class="chalie-button"' if b["type"] == "button" else ""
            return (f'<p><a{css} href="{_e(b["url"])}" target="_blank" '
                    f'rel="noopener noreferrer nofollow">{_e(label)}</a></p>')
        case "divider":
            return "<hr>"
        case "code":
            return f"<pre><code>{_e(b['text'])}</code></pre>"
        case "section":
            title = (f'<div class="chalie-section-title">{_e(b["title"])}</div>'
                     if b["title"] else "")
            return f"<section>{title}{''.join(_render(i) for i in b['blocks'])}</section>"
    return ""  # check_blocks makes no other type


_CSS = """\
SCOPE{box-sizing:border-box;max-width:100%;margin:8px 0;padding:12px 14px;border:1px solid \
rgba(127,127,127,.25);border-left:4px solid ACCENT;border-radius:8px;color:inherit;\
font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;overflow-wrap:anywhere}
SCOPE .chalie-card-head{display:flex;justify-content:space-between;align-items:baseline;\
gap:8px;margin-bottom:8px}
SCOPE .chalie-card-title{font-weight:600}
SCOPE .chalie-card-tool{font-size:12px;opacity:.6}
SCOPE p{margin:6px 0;white-space:pre-wrap}
SCOPE h3,SCOPE h4,SCOPE h5{margin:10px 0 6px;line-height:1.25}
SCOPE h3{font-size:1.2em}
SCOPE h4{font-size:1.08em}
SCOPE h5{font-size:1em}
SCOPE ul,SCOPE ol{margin:6px 0;padding-left:22px}
SCOPE dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px;margin:6px 0}
SCOPE dt{font-weight:600}
SCOPE dd{margin:0}
SCOPE table{display:block;overflow-x:auto;border-collapse:collapse;margin:6px 0}
SCOPE th,SCOPE td{padding:4px 8px;border-bottom:1px solid rgba(127,127,127,.25);text-align:left}
SCOPE img{max-width:100%;height:auto;border-radius:6px}
SCOPE a{color:ACCENT}
SCOPE a.chalie-button{display:inline-block;padding:6px 12px;border-radius:6px;\
background:ACCENT;color:#fff;text-decoration:none}
SCOPE hr{margin:10px 0;border:0;border-top:1px solid rgba(127,127,127,.3)}
SCOPE pre{margin:6px 0;padding:8px 10px;border-radius:6px;background:rgba(127,127,127,.12);\
overflow-x:auto}
SCOPE code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
SCOPE section{margin:8px 0;padding-left:10px;border-left:2px solid rgba(127,127,127,.25)}
SCOPE .chalie-section-title{margin:4px 0;font-weight:600}
"""
