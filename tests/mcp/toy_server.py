"""A tiny MCP server for the tests, written with the SDK's MCPServer.

    python toy_server.py                  # over stdio
    python toy_server.py --port 8123      # over streamable HTTP on 127.0.0.1:8123/mcp

Tools: `echo` answers its text; `add_tool` adds a tool and sends tools/list_changed; `crash`
ends the process at once, as a crashing server would; `pid` answers the process id; `nap`
sleeps before it answers; `header` answers an HTTP request header the client sent. echo, pid,
nap and header say they only read (readOnlyHint).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server: MCPServer[Any] = MCPServer("toy")
READS = ToolAnnotations(read_only_hint=True)  # it changes nothing: Chalie runs it without asking


@server.tool(description="Answer with the text you were given.", annotations=READS)
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Add a tool named `name`, then tell the client the list changed.")
async def add_tool(name: str, ctx: Context[Any, Any]) -> str:
    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"A tool added at run time: {name}.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="End the server process at once.")
def crash() -> str:
    os._exit(3)


@server.tool(description="The server's process id.", annotations=READS)
def pid() -> int:
    return os.getpid()


@server.tool(description="Sleep `seconds`, then answer.", annotations=READS)
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


@server.tool(description="The value of request header `name`, over HTTP.", annotations=READS)
def header(name: str, ctx: Context[Any, Any]) -> str:
    headers = ctx.headers or {}
    return headers.get(name, "(none)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    port = parser.parse_args().port
    if port:
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()


if __name__ == "__main__":
    main()
