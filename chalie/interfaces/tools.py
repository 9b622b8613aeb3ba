"""A paired interface's tools, built from the capabilities stored when it paired or refreshed."""

from __future__ import annotations

from chalie.interfaces.capabilities import decode_capabilities
from chalie.interfaces.client import InterfaceClient
from chalie.interfaces.tool import InterfaceTool
from chalie.metrics import Metrics
from chalie.store.interface_rows import InterfaceRow
from chalie.tools.base import Tool


def interface_tools(row: InterfaceRow, client: InterfaceClient,
                    metrics: Metrics | None) -> list[Tool]:
    return [
        InterfaceTool(interface_id=row.id, interface_name=row.name, host=row.host,
                      port=row.port, capability=capability, client=client, metrics=metrics)
        for capability in decode_capabilities(row.capabilities)
    ]
