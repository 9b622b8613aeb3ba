"""One capability of a paired interface as a tool the model can call: POST /execute.

The model reads the answer's `text` and `data` (compact JSON); `blocks` become a card for the
person (HTML made by Chalie, see blocks.py), titled by the blocks' opening heading or else by
the capability's name, and the model is told a card was shown. An `openUrl` alone becomes a
card with that one link; a url that is not http(s) is dropped. The interface's `error` goes
back to the model as an error result; so does an interface that does not answer, or answers
outside the contract. Nothing is raised.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import msgspec
import structlog

from chalie.frames import Card
from chalie.interfaces.blocks import Block, render_card, safe_url
from chalie.interfaces.capabilities import Capability, decode_capabilities, tool_spec
from chalie.interfaces.client import ExecuteResult, InterfaceClient
from chalie.interfaces.errors import InterfaceError, shown
from chalie.metrics import Metrics
from chalie.store.interface_rows import InterfaceRow
from chalie.tools.base import Danger, ToolContext, ToolOutcome, tool_error

log = structlog.get_logger("chalie.interfaces")

NO_RESULT = "(done: no result text)"
MAX_TITLE = 120
# Each interface's cards get one of these, always the same one for the same interface.
ACCENTS = ("#4f6bed", "#0f8b7d", "#c2620c", "#a8437f", "#2f7d32", "#6d4fd8", "#0e7490")

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "boolean": (bool,), "object": (dict,),
}


class InterfaceTool:
    """A paired program's capability. Its danger is what the program declared for it
    (`danger`, or `read_only: true` for safe), else `confirm`: a tool that says nothing may
    change anything, so the person approves each call unless they always allow it."""

    def __init__(self, *, interface_id: str, interface_name: str, host: str, port: int,
                 capability: Capability, client: InterfaceClient,
                 metrics: Metrics | None) -> None:
        self.spec = tool_spec(capability)
        self.danger: Danger = capability.effective_danger
        self._interface_id = interface_id
        self._interface_name = interface_name
        self._host = host
        self._port = port
        self._capability = capability
        self._client = client
        self._metrics = metrics
        digest = hashlib.sha256(interface_id.encode()).digest()
        self._accent = ACCENTS[digest[0] % len(ACCENTS)]

    def reads_only(self, args: dict[str, Any]) -> bool:
        return self._capability.read_only

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        problem = args_problem(self._capability, args)
        if problem is not None:
            return tool_error(problem)  # the model's mistake: no call is made
        try:
            result = self._client.execute(self._host, self._port, self._capability.name, args)
            card = self._card(result)
        except InterfaceError as e:
            self._count("failed")
            log.warning("interface_call_failed", interface_id=self._interface_id,
                        capability=self._capability.name, error=str(e))
            return tool_error(f"{self._interface_name} did not answer: {e}")
        if result.error:
            self._count("error")
            return tool_error(result.error)
        self._count("ok")
        return ToolOutcome(text=_model_text(result, card), card=card)

    def _card(self, result: ExecuteResult) -> Card | None:
        """The answer's blocks (or its openUrl alone) as a card, or None if it has neither."""
        if result.error:
            return None
        open_url = safe_url(result.open_url)
        blocks: list[Block] = list(result.blocks or ())
        title = self._capability.name
        if blocks and blocks[0]["type"] == "heading":
            title = blocks.pop(0)["text"]  # it titles the card rather than repeat under it
        elif not blocks and open_url is not None:
            blocks = [{"type": "link", "url": open_url, "text": open_url}]
        elif not blocks:
            return None
        title = title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1] + "…"
        scope_id = uuid.uuid4().hex
        html, css = render_card(blocks, tool_name=self.spec.name, title=title,
                                accent_color=self._accent, scope_id=scope_id)
        return Card(html=html, css=css, scope_id=scope_id, tool_name=self.spec.name,
                    title=title, accent_color=self._accent, output_id=uuid.uuid4().hex,
                    open_url=open_url)

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.interface_calls.labels(result=result).inc()


def interface_tools(row: InterfaceRow, client: InterfaceClient,
                    metrics: Metrics | None) -> list[InterfaceTool]:
    """A paired interface's tools, from the capabilities stored when it paired or refreshed.
    Raises InterfaceError when the stored capabilities no longer pass the checks."""
    return [
        InterfaceTool(interface_id=row.id, interface_name=row.name, host=row.host,
                      port=row.port, capability=capability, client=client, metrics=metrics)
        for capability in decode_capabilities(row.capabilities)
    ]


def args_problem(capability: Capability, args: dict[str, Any]) -> str | None:
    """Why the model's arguments do not fit the capability's parameters, or None."""
    known = {p.name: p for p in capability.parameters}
    for name in args:
        if name not in known:
            accepted = ", ".join(known) or "none"
            return f"unknown parameter {shown(name)} (accepted: {accepted})"
    for p in capability.parameters:
        value = args.get(p.name)
        if value is None:
            if p.required:
                return f"missing required parameter {shown(p.name)} ({p.description})"
            continue
        if not isinstance(value, _PY_TYPES[p.type]) or (
                p.type == "number" and isinstance(value, bool)):
            return f"parameter {shown(p.name)} must be a {p.type}, got {shown(value)}"
    return None


def _model_text(result: ExecuteResult, card: Card | None) -> str:
    parts = []
    if result.text and result.text.strip():
        parts.append(result.text)
    if result.data is not None:
        parts.append(msgspec.json.encode(result.data).decode())
    text = "\n".join(parts) or NO_RESULT
    if card is not None:
        text += f"\n(The person was shown a card: {shown(card.title, MAX_TITLE)}"
        text += f", which links to {card.open_url}.)" if card.open_url else ".)"
    return text
