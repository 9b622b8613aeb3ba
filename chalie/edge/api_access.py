"""The scoped API tokens and the MCP server at /mcp, as the Server starts and stops them.

The tokens are read from the store at start; when each was last used goes back to the store
every `TOUCH_EVERY_S` (not on every call). The MCP server starts on the first request to /mcp
(the SDK takes half a second and ~25 MiB to import) and stops with the server.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import structlog
from tornado.ioloop import PeriodicCallback

from chalie.actors.store_writer_messages import TouchApiTokens
from chalie.actors.supervisor import Directory
from chalie.edge.context import EdgeContext
from chalie.edge.tokens import TOUCH_EVERY_S, TokenBoard
from chalie.store import token_rows

log = structlog.get_logger("chalie.edge")


class ApiAccess:
    def __init__(self, *, read: Callable[[], apsw.Connection], directory: Directory) -> None:
        self.tokens = TokenBoard()
        self.tokens.load(token_rows.all_tokens(read()))
        self._directory = directory
        self._toucher = PeriodicCallback(self.touch, TOUCH_EVERY_S * 1000)
        self._toucher.start()

    def touch(self) -> None:
        used = self.tokens.take_touched()
        if used and not self._directory.tell("store_writer", TouchApiTokens(used)):
            log.info("api_tokens_untouched", tokens=len(used))  # restarting: a later beat

    async def stop(self, edge: EdgeContext | None) -> None:
        self._toucher.stop()
        self.touch()
        if edge is not None and edge.mcp is not None:
            await edge.mcp.stop()
