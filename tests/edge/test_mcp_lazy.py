"""The MCP SDK is loaded only when /mcp is first used: a server nobody reaches over MCP keeps
its idle memory (the SDK costs ~25 MiB and half a second)."""

from __future__ import annotations

import subprocess
import sys


def test_starting_the_server_code_imports_no_mcp_sdk() -> None:
    """Importing the app, its routes and the server wiring leaves `mcp` unimported."""
    code = ("import sys, chalie.cli, chalie.server, chalie.edge.app; "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
