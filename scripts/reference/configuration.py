"""docs/reference/configuration.md: every key of config/chalie.toml, its default and its comment.

The values are read with tomllib; the comments by scanning the lines, with these rules:
- the comment lines before the first table are the file's own introduction;
- the comment lines directly above a key (no blank line between) describe it, and the keys
  right under it that have no comment of their own (the file describes `host` and `port` in
  one comment): one group, one heading;
- a comment at the end of a key's line is that key's own;
- a table's introduction is the comment directly above its header, or the part of the comment
  right under its header that comes before a `#` line alone (the rest describes the first
  keys), or, for a table without keys, all of its comment;
- a comment followed by a blank line belongs to the table it is in (its introduction when no
  key came yet, else a note of its own).
Every key of the file must appear in exactly one group: scanning and tomllib are compared, and a
key that one finds and the other does not stops the generator.

Each key's type comes from the Config struct that reads it (chalie/config.py), or from its value
when the struct does not know it; its environment variable from chalie.settings.env_name; what a
reload takes from chalie.reload.RELOADABLE; what the settings page saves from
chalie.settings.SETTABLE and SECRETS.
"""

from __future__ import annotations

import functools
import json
import math
import re
import tomllib
import typing
from dataclasses import dataclass, field
from typing import Any

import msgspec
import msgspec.inspect as mi

from chalie import settings
from chalie.config import Config
from chalie.reload import RELOADABLE

from .markdown import GENERATED, code, escape, heading, page, prose, slug, table

SOURCE = "config/chalie.toml"
_HEADER = re.compile(r"^\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^([A-Za-z0-9_\-.\"' ]+?)\s*=(.*)$")


@dataclass
class Group:
    """Keys described by one comment (none: a note of the table's own)."""

    comment: list[str]
    keys: list[str] = field(default_factory=list)
    trailing: dict[str, str] = field(default_factory=dict)


@dataclass
class Table:
    name: str
    intro: list[str]
    groups: list[Group] = field(default_factory=list)


def scan(text: str) -> tuple[list[str], list[Table]]:
    """The file's introduction and its tables, each with its groups of keys and comments."""
    intro: list[str] = []
    tables: list[Table] = []
    pending: list[str] = []
    group: Group | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if line.startswith("#"):
            pending.append(line[2:] if line.startswith("# ") else line[1:])
        elif not line:
            if pending:
                _settle(pending, intro, tables)
            pending, group = [], None
        elif line.startswith("[["):
            raise ValueError(f"{SOURCE}, line {i}: arrays of tables are not read by "
                             "gen_reference.py; give a default as a key (servers = [])")
        elif found := _HEADER.match(line):
            tables.append(Table(found[1].replace(" ", ""), pending))
            pending, group = [], None
        elif found := _KEY.match(line):
            if not tables:
                raise ValueError(f"{SOURCE}, line {i}: a key before the first table")
            key = ".".join(p.strip().strip("\"'") for p in found[1].split("."))
            trailing, i = _value_end(found[2], lines, i)
            if pending or group is None:
                group = Group(_first_group_split(tables[-1], pending))
                tables[-1].groups.append(group)
                pending = []
            group.keys.append(key)
            if trailing:
                group.trailing[key] = trailing
        else:
            raise ValueError(f"{SOURCE}, line {i}: not a comment, a table or a key: {line!r}")
    if pending:
        _settle(pending, intro, tables)
    return intro, tables


def _settle(comment: list[str], intro: list[str], tables: list[Table]) -> None:
    """A comment followed by a blank line: the file's, the table's introduction, or a note."""
    if not tables:
        intro.extend([*comment, ""])
    elif not tables[-1].groups:
        tables[-1].intro.extend([*comment, ""])
    else:
        tables[-1].groups.append(Group(list(comment)))


def _first_group_split(table: Table, comment: list[str]) -> list[str]:
    """The comment of a table's first keys, right under its header: what comes before its
    last `#` line alone is the table's introduction."""
    if table.groups or table.intro or "" not in comment:
        return list(comment)
    cut = len(comment) - comment[::-1].index("")
    table.intro = comment[:cut]
    return comment[cut:]


def _value_end(rest: str, lines: list[str], i: int) -> tuple[str, int]:
    """The comment at the end of a key's line, and the index of the line after its value
    (a value may go on over several lines: an array, a multi-line string)."""
    start = rest.strip()[:3]
    if start in ('"""', "'''") and rest.count(start) < 2:
        while i < len(lines) and start not in lines[i]:
            i += 1
        return "", i + 1
    depth, trailing = _scan_value(rest)
    while depth > 0 and i < len(lines):
        more, _ = _scan_value(lines[i])
        depth += more
        i += 1
    return trailing, i


def _scan_value(text: str) -> tuple[int, str]:
    """How many brackets `text` opens (less those it closes), and its comment."""
    depth, quote, escaped = 0, "", False
    for at, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return depth, text[at + 1:].strip()
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth, ""


def check_complete(data: dict[str, Any], tables: list[Table]) -> None:
    """Every key tomllib reads is in one group, and every key of a group is one tomllib read."""
    declared = {t.name for t in tables}
    scanned = {(t.name, k.split(".")[0]) for t in tables for g in t.groups for k in g.keys}
    read = {(t.name, k) for t in tables for k in _lookup(data, t.name)
            if f"{t.name}.{k}" not in declared}
    if scanned != read:
        raise ValueError(f"{SOURCE}: keys read by tomllib but not found in its lines: "
                         f"{sorted(read - scanned)}; found but not read: {sorted(scanned - read)}")


def _lookup(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        data = data[part]
    return data


def toml_value(value: Any) -> str:
    """A value as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if value is None:
        return "not set"
    return str(value) if not hasattr(value, "isoformat") else value.isoformat()


@functools.cache
def declared_type(dotted: str) -> Any:
    """The type Config declares for `dotted` (None when it declares none)."""
    kind: Any = Config
    for part in dotted.split("."):
        kind = _unwrap(kind)
        if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
            return None
        fields = {f.name: f.type for f in msgspec.structs.fields(kind)}
        if part not in fields:
            return None
        kind = fields[part]
    return kind


def _unwrap(kind: Any) -> Any:
    """`X | None` as X."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if len(args) == 1 and type(None) in typing.get_args(kind) else kind


def type_name(info: mi.Type) -> str:
    """A declared type in words."""
    simple = {mi.StrType: "string", mi.IntType: "integer", mi.FloatType: "float",
              mi.BoolType: "boolean", mi.StructType: "table"}
    for kind, name in simple.items():
        if isinstance(info, kind):
            return name
    if isinstance(info, mi.DictType):
        return f"table of {type_name(info.value_type)}s"
    if isinstance(info, mi.LiteralType):
        return "one of " + ", ".join(code(toml_value(v)) for v in info.values)
    if isinstance(info, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        item = type_name(info.item_type)
        return f"list, each {item}" if item.startswith("one of") else f"list of {item}s"
    if isinstance(info, mi.UnionType):
        return " or ".join(type_name(t) for t in info.types if not isinstance(t, mi.NoneType))
    return "value"


def _value_type(value: Any) -> str:
    kinds = [(bool, "boolean"), (str, "string"), (int, "integer"), (float, "float"),
             (list, "list"), (dict, "table")]
    return next((name for kind, name in kinds if isinstance(value, kind)), "value")


def _has_struct(info: mi.Type) -> bool:
    if isinstance(info, mi.StructType):
        return True
    inner = [getattr(info, "item_type", None), getattr(info, "value_type", None),
             *getattr(info, "types", ())]
    return any(_has_struct(t) for t in inner if t is not None)


def key_row(dotted: str, value: Any, *, anchor: bool = True) -> list[str]:
    """Key, default, type, environment variable, what changes it, for one key (with the key's
    anchor on its name, unless its group's heading has it)."""
    kind = declared_type(dotted)
    info = mi.type_info(kind) if kind is not None else None
    kind_name = type_name(info) if info is not None else _value_type(value)
    env = code(settings.env_name(dotted))
    if info is not None and _has_struct(info):
        env = code(settings.env_name(dotted) + "__<KEY>") \
            if isinstance(mi.type_info(_unwrap(kind)), mi.StructType) else "none"
    marks = ["live" if dotted in RELOADABLE else "restart"]
    if dotted in settings.SETTABLE:
        marks.append("settings page")
    if dotted in settings.SECRETS:
        marks.append("secret")
    default = "not set" if value is None else code(toml_value(value))
    name = code(dotted) + ("{#" + slug(dotted) + "}" if anchor else "")
    return [name, default, escape(kind_name, in_table=True), env,
            ", ".join(marks)]


_HEADERS = ("Key", "Default", "Type", "Environment variable", "Changes")


def _entries(dotted: str) -> list[str]:
    """For a list of tables (mcp.servers): the keys of each entry."""
    kind = declared_type(dotted)
    info = mi.type_info(kind) if kind is not None else None
    item = getattr(info, "item_type", None)
    if not isinstance(item, mi.StructType):
        return []
    rows = [[code(f.encode_name), escape(type_name(f.type), in_table=True),
             "required" if f.required else code(toml_value(
                 f.default if f.default is not msgspec.NODEFAULT else f.default_factory()))]
            for f in item.fields]
    return [f"Each entry of {code(dotted)} takes:", *table(("Key", "Type", "Default"), rows)]


def _other_keys(name: str, in_file: set[str], declared: set[str]) -> list[str]:
    """Keys the table's struct takes that the file does not set (a job's overrides)."""
    kind = declared_type(name)
    if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
        return []
    rows = [key_row(f"{name}.{f.name}", None) for f in msgspec.structs.fields(kind)
            if f.name not in in_file and f"{name}.{f.name}" not in declared]
    if not rows:
        return []
    return [*heading(3, "Other keys", slug(f"{name}.other-keys")),
            f"Keys {code(name)} also takes, which {code(SOURCE)} leaves unset:",
            *table(_HEADERS, rows)]


def render_table(t: Table, data: dict[str, Any], declared: set[str]) -> list[str]:
    out = [*heading(2, escape(t.name), slug(t.name)), *prose(t.intro)]
    values = _lookup(data, t.name)
    for group in t.groups:
        if group.keys:
            out += heading(3, escape(", ".join(group.keys)), slug(f"{t.name}.{group.keys[0]}"))
        out += prose(group.comment)
        for key, note in group.trailing.items():
            out += ["", f"{code(f'{t.name}.{key}')}: {escape(note)}", ""]
        if group.keys:
            out += table(_HEADERS, [key_row(f"{t.name}.{k}", _lookup(values, k), anchor=n > 0)
                                    for n, k in enumerate(group.keys)])
            for key in group.keys:
                out += _entries(f"{t.name}.{key}")
    in_file = {k.split(".")[0] for g in t.groups for k in g.keys}
    return out + _other_keys(t.name, in_file, declared)


_LAYERS = """\
A setting is read from four places; each one overrides the ones before it:

1. `config/chalie.toml`, the defaults below;
2. the file given to `chalie serve --config FILE`, which holds only the keys you change, in the
   same tables;
3. the settings saved from the web page's settings (or by `chalie setup`, or with
   `PATCH /api/settings`) into `settings.toml` in the data directory (`store.path`): only the
   keys marked *settings page* below;
4. the environment: `CHALIE_<SECTION>__<KEY>`, with two underscores between the parts, e.g.
   `CHALIE_SERVER__PORT=9000`; a job's table and its fallback go one level deeper
   (`CHALIE_LLM__PRIMARY__MODEL`, `CHALIE_LLM__PRIMARY__FALLBACK__MODEL`). The text is read as
   the key's type; a list is given as comma-separated items (`CHALIE_TOOLS__CONFIRM=memory,forget`).
   A key the environment sets cannot be saved from the settings page. A key whose environment
   variable is *none* (a list of tables) is set in a file only.

An unknown key, or a value of the wrong type or out of its range, stops the start with a line
that names the key.

What the *Changes* column says:
"""
_MARKS = (
    ("live", "takes effect while the server runs: on a reload (SIGHUP, e.g. `systemctl reload "
     "chalie`, reads the config file again) or when saved from the settings page"),
    ("restart", "takes effect at the next start; a reload or a save reports it as waiting for "
     "a restart"),
    ("settings page", "can be changed from the web page's settings (`PATCH /api/settings`)"),
    ("secret", "its value is never sent back by `GET /api/settings`, only whether it is set "
     "(the notification URLs are shown masked)"),
)


def render(text: str) -> str:
    """configuration.md for the defaults file whose text is `text`."""
    data = tomllib.loads(text)
    intro, tables = scan(text)
    check_complete(data, tables)
    declared = {t.name for t in tables}
    out = [GENERATED.format(source=SOURCE), "", "# Configuration", "",
           f"Every setting Chalie reads, with its default. This page is generated from "
           f"{code(SOURCE)}, the file that holds every default, and its comments.",
           *prose(intro), *heading(2, "How a setting is changed", "how-a-setting-is-changed"),
           _LAYERS, *table(("Mark", "Meaning"), _MARKS)]
    for t in tables:
        out += render_table(t, data, declared)
    return page(out)
