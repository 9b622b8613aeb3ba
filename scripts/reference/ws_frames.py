"""docs/reference/ws-frames.md from the msgspec structs of the /ws frames.

Client to server: the union chalie.edge.frames.ClientFrame, which the server decodes strictly.
Server to client: the union chalie.frames.Frame (each frame logged with its `seq`), then every
other tagged struct of chalie.frames that no frame holds (MessageDelta: pushed live, never
logged), then the keepalive chalie.frames.PING. For each frame: its `type` tag, each field's
type and default (msgspec.inspect) and the struct's docstring; then the structs frames hold.
"""

from __future__ import annotations

import inspect
import json
import typing

import msgspec
import msgspec.inspect as mi

from .markdown import GENERATED, code, escape, heading, page, prose, slug, table

SOURCES = ("chalie/edge/frames.py", "chalie/frames.py")
Kind = type[msgspec.Struct]
Nested = dict[Kind, None]  # the structs frames hold, in the order they were found
_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _link(cls: type) -> str:
    return f"[{cls.__name__}](#{slug('type-' + cls.__name__)})"


def type_text(info: mi.Type, nested: Nested) -> str:
    """A field's type as JSON names it, with links to the structs it holds (noted in
    `nested`)."""
    simple = {mi.StrType: "string", mi.IntType: "integer", mi.FloatType: "number",
              mi.BoolType: "boolean", mi.NoneType: "null", mi.AnyType: "any JSON value"}
    for kind, name in simple.items():
        if isinstance(info, kind):
            bounds = [f"{sign} {getattr(info, attr)}" for attr, sign in _BOUNDS
                      if getattr(info, attr, None) is not None]
            return " ".join([name, *bounds])
    if isinstance(info, mi.LiteralType):
        return " or ".join(code(json.dumps(v)) for v in info.values)
    if isinstance(info, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        return "array of " + type_text(info.item_type, nested)
    if isinstance(info, mi.DictType):
        return "object whose values are " + type_text(info.value_type, nested)
    if isinstance(info, mi.StructType):
        nested[info.cls] = None
        return _link(info.cls)
    if isinstance(info, mi.UnionType):
        return " or ".join(type_text(t, nested) for t in info.types)
    return "any JSON value"


def _default(f: mi.Field, always: str) -> str:
    if f.required:
        return always
    value = f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
    return code(msgspec.json.encode(value).decode())


def _doc(cls: type) -> list[str]:
    own = cls.__dict__.get("__doc__")
    return prose(inspect.cleandoc(own).splitlines()) if own else []


def struct_section(cls: Kind, anchor: str, title: str, nested: Nested, *,
                   required: str, what: str = "frame") -> list[str]:
    """A struct's heading, docstring and fields (its tag first)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    rows = []
    if info.tag_field is not None:
        rows.append([code(info.tag_field), code(json.dumps(info.tag)), required])
    rows += [[code(f.encode_name), type_text(f.type, nested), _default(f, required)]
             for f in info.fields]
    out = [*heading(3, title, anchor), *_doc(cls)]
    out += table(("Field", "Type", "Default"), rows) if rows else ["", "No fields.", ""]
    if cls.__struct_config__.omit_defaults:
        out += ["", f"A field at its default is left out of the {what}.", ""]
    if info.forbid_unknown_fields:
        out += ["", "Any other field is refused.", ""]
    return out


def client_frames() -> list[Kind]:
    from chalie.edge.frames import ClientFrame  # noqa: PLC0415 (imported when needed)

    return list(typing.get_args(ClientFrame))


def server_frames() -> list[Kind]:
    """The logged frames, in the union's order, then the other tagged structs of
    chalie.frames that no frame holds, in the order the module defines them."""
    from chalie import frames  # noqa: PLC0415

    logged = list(typing.get_args(frames.Frame))
    held: Nested = {}
    for cls in logged:
        struct_section(cls, "", "", held, required="")
    others = [c for c in vars(frames).values()
              if isinstance(c, type) and issubclass(c, msgspec.Struct)
              and c.__module__ == frames.__name__ and not c.__name__.startswith("_")
              and c.__struct_config__.tag is not None and c not in logged and c not in held]
    return logged + others


def _tag(cls: Kind) -> str:
    return str(cls.__struct_config__.tag)


_CLIENT = """\
What a client sends on `/ws`: one JSON object a frame, its kind in `type`. A frame that is not
JSON, has an unknown `type`, a field of the wrong type or one not listed, or is larger than
`server.max_frame_bytes`, is answered with an `error` frame naming the problem; the socket
stays open."""

_SERVER = """\
What the server sends on `/ws`. Every frame but `message_delta` and `ping` is written to the
channel's event log before it is pushed, with `seq`, the channel's next number: a client that
reconnects sends `resume` with the last `seq` it saw and gets every frame after it. (While the
store cannot take writes, an `error` or `done` frame it could not log is pushed with `seq` 0.)"""


def render() -> str:
    """ws-frames.md from the frame structs as they are now."""
    from chalie import frames  # noqa: PLC0415

    nested: Nested = {}
    out = [GENERATED.format(source=" and ".join(SOURCES)), "", "# /ws frames", "",
           "Every frame of the chat WebSocket, with its fields. This page is generated from the "
           f"msgspec structs that decode and encode them ({code(SOURCES[0])}: client to server; "
           f"{code(SOURCES[1])}: server to client). What they are for, and how a conversation "
           "goes: [The /ws protocol](../ws-protocol.md).",
           *heading(2, "Client to server", "client-to-server"), _CLIENT]
    for cls in client_frames():
        out += struct_section(cls, slug(f"client-{_tag(cls)}"), code(_tag(cls)), nested,
                              required="required")
    out += [*heading(2, "Server to client", "server-to-client"), _SERVER]
    for cls in server_frames():
        out += struct_section(cls, slug(f"server-{_tag(cls)}"), code(_tag(cls)), nested,
                              required="always sent")
    ping = json.loads(frames.PING)
    out += [*heading(3, code(ping["type"]), slug(f"server-{ping['type']}")),
            f"The keepalive, sent as {code(frames.PING)} every `server.ping_interval_s` "
            "seconds; it has no `seq` and is never logged. Answer it with a `pong` frame: a "
            "socket that leaves `server.ping_misses` of them in a row unanswered is closed.", ""]
    out += [*heading(2, "Nested types", "nested-types"),
            "The objects that frames hold, by name.", ""]
    seen: set[Kind] = set()
    while len(seen) < len(nested):  # the structs the nested ones hold, too
        for cls in set(nested) - seen:
            seen.add(cls)
            struct_section(cls, "", "", nested, required="")
    for cls in sorted(nested, key=lambda c: c.__name__):
        out += struct_section(cls, slug(f"type-{cls.__name__}"), escape(cls.__name__), nested,
                              required="required", what="object")
    return page(out)

