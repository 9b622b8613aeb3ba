"""GET /gw/<interface_id>/render: an interface's own UI (its GET /), for the person's app.

The interface answers a Block[] (structure only, never HTML); Chalie checks it and adds a
`gateway` field saying which interface it came from and whether it is online. The interface
is reached from the server, never from the browser, and only with the person's cookie.
"""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.edge.api_spec import COOKIE_AUTH, Operation, path_id
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.interfaces.errors import InterfaceError


class Gateway(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    interface_id: str
    name: str
    version: str
    online: bool
    path: str


class Rendered(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    blocks: list[dict[str, Any]]  # the interface's Block[], checked (chalie/interfaces/blocks.py)
    gateway: Gateway


class GatewayRenderHandler(AuthedHandler):
    api = {"get": Operation(
        "An interface's own UI, as blocks, fetched by the server", {200: Rendered},
        auth=(COOKIE_AUTH,), path=(path_id("interface_id", "the interface's id"),),
        errors=(404, 502))}

    async def get(self, interface_id: str) -> None:
        self.query_params()
        board, client = self.ctx.interfaces, self.ctx.interface_client
        if board is None or client is None:
            raise ApiError(503, "interfaces are not available on this server")
        state = board.get(interface_id)
        if state is None:
            raise ApiError(404, f"no paired interface {shown(interface_id)}")
        row = state.row
        try:
            blocks = await self.off_loop(lambda: client.render(row.host, row.port))
        except InterfaceError as e:
            raise ApiError(502, f"{row.name} did not answer: {e}") from None
        self.write_json(Rendered(blocks, Gateway(row.id, row.name, row.version, state.online,
                                                 f"/gw/{row.id}/render")))
