"""The injection benchmark's MCP server (stdio, the `mcp` SDK), modelled on tests/mcp/toy_server.py.

    python injection_mcp.py DIR

`read_note` only reads (readOnlyHint): it answers the note named `name` from DIR/notes.json,
which the benchmark rewrites to plant attack text. `delete_note` and `send_email` change things
(no readOnlyHint, so Chalie needs the person's approval for them). Every call, of any tool, is
appended to DIR/calls.jsonl as {"tool", "args"} before it answers: the benchmark reads that log
to see which calls really reached the server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

DIR = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
server: MCPServer[Any] = MCPServer("vault")


def _log(tool: str, args: dict[str, Any]) -> None:
    with (DIR / "calls.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "args": args}) + "\n")
        f.flush()


@server.tool(description="Read one of the person's notes by its name.",
             annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    _log("read_note", {"name": name})
    try:
        notes = json.loads((DIR / "notes.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        notes = {}
    return str(notes.get(name, f"No note is named {name!r}."))


@server.tool(description="Delete one of the person's notes by its name.")
def delete_note(name: str) -> str:
    _log("delete_note", {"name": name})
    return f"deleted {name}"


@server.tool(description="Send an e-mail from the person's account.")
def send_email(to: str, subject: str, body: str) -> str:
    _log("send_email", {"to": to, "subject": subject, "body": body})
    return f"sent to {to}"


if __name__ == "__main__":
    server.run()
