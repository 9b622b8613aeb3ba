"""An interface's capability as a tool: what the model reads, the card the person sees, metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest

from chalie.clock import ManualClock
from chalie.interfaces.capabilities import parse_capabilities
from chalie.interfaces.client import InterfaceClient
from chalie.interfaces.tool import ACCENTS, NO_RESULT, InterfaceTool
from chalie.metrics import Metrics
from chalie.tools.base import ToolContext, ToolOutcome


def _no_store() -> Any:
    raise AssertionError("interface tools never read the store")


CTX = ToolContext(channel="default", turn_id="turn-1", read=_no_store, clock=ManualClock())
CAPABILITY = parse_capabilities(msgspec.json.encode([{
    "name": "forecast", "description": "Weather for a city.", "parameters": [
        {"name": "city", "type": "string", "required": True, "description": "City name"},
        {"name": "days", "type": "number", "required": False, "description": "Days ahead"},
    ]}])).tools[0]


class Interface:
    """A fake interface at the transport: answers each POST /execute with `answer(request)`."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.calls: list[dict[str, Any]] = []
        self.metrics = Metrics()

        def handler(request: httpx.Request) -> httpx.Response:
            self.calls.append(msgspec.json.decode(request.content))
            return answer(request)

        http = httpx.Client(transport=httpx.MockTransport(handler), follow_redirects=False)
        client = InterfaceClient(http, health_timeout_s=5.0, connect_timeout_s=2.0,
                                 execute_timeout_s=30.0, max_response_bytes=100_000)
        self.tool = InterfaceTool(interface_id="iface-1", interface_name="Weather",
                                  host="127.0.0.1", port=9001, capability=CAPABILITY,
                                  client=client, metrics=self.metrics)

    def run(self, args: dict[str, Any] | None = None) -> ToolOutcome:
        return self.tool.run({"city": "Paris"} if args is None else args, CTX)

    def count(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value("chalie_interface_tool_calls_total",
                                                      {"result": result})
        return value or 0.0


def answering(value: Any, status: int = 200) -> Interface:
    return Interface(lambda request: httpx.Response(status, json=value))


def test_the_tool_offers_the_capability_and_asks_first_unless_it_says_otherwise() -> None:
    """Its spec is the capability's schema under the capability's name; a capability that
    declares nothing needs the person's approval (confirm) and may change things."""
    tool = answering({}).tool
    assert tool.spec.name == "forecast"
    assert tool.spec.parameters["required"] == ["city"]
    assert tool.danger == "confirm"
    assert tool.reads_only({"city": "Paris"}) is False


def test_text_is_what_the_model_reads() -> None:
    """An answer with text alone is that text, and counts as ok."""
    iface = answering({"text": "Sunny, 21°C"})
    assert iface.run() == ToolOutcome(text="Sunny, 21°C")
    assert iface.calls == [{"capability": "forecast", "params": {"city": "Paris"}}]
    assert iface.count("ok") == 1


def test_data_is_added_as_compact_json() -> None:
    """Structured data follows the text on its own line; data alone is the whole result."""
    assert answering({"text": "Sunny", "data": {"max": 21, "rain": [0, 1]}}).run().text == (
        'Sunny\n{"max":21,"rain":[0,1]}')
    assert answering({"data": {"max": 21}}).run().text == '{"max":21}'


def test_an_answer_with_nothing_says_it_was_done() -> None:
    """No text and no data: the model is told the call went through."""
    assert answering({"text": None, "data": None}).run() == ToolOutcome(text=NO_RESULT)
    assert answering({"text": "  "}).run().text == NO_RESULT


def test_the_interfaces_error_is_an_error_result() -> None:
    """`error` goes to the model as an error, counted as "error", with no card."""
    iface = answering({"error": "city not found", "blocks": [{"type": "text", "text": "x"}]})
    assert iface.run() == ToolOutcome(text="error: city not found", is_error=True)
    assert iface.count("error") == 1
    assert iface.count("ok") == 0


def test_blocks_become_a_card_titled_by_their_opening_heading() -> None:
    """The person gets a card; its title is the heading, which is not repeated in the body."""
    outcome = answering({"text": "Sunny", "blocks": [
        {"type": "heading", "text": "Paris <today>"}, {"type": "text", "text": "21°C"}]}).run()
    card = outcome.card
    assert card is not None
    assert card.title == "Paris <today>"
    assert card.tool_name == "forecast"
    assert card.accent_color in ACCENTS
    assert card.open_url is None
    assert len(card.scope_id) == 32
    assert len(card.output_id) == 32
    assert card.scope_id != card.output_id
    assert card.html.startswith(f'<div class="chalie-card chalie-card-{card.scope_id}">')
    assert '<span class="chalie-card-title">Paris &lt;today&gt;</span>' in card.html
    assert card.html.endswith('<div class="chalie-card-body"><p>21°C</p></div></div>')
    assert card.css.startswith(f".chalie-card-{card.scope_id}{{")
    assert outcome.text == 'Sunny\n(The person was shown a card: "Paris <today>".)'
    assert outcome.is_error is False


def test_a_card_without_an_opening_heading_is_titled_by_the_capability() -> None:
    """Blocks that start otherwise keep every block; the title is the capability name."""
    card = answering({"blocks": [{"type": "text", "text": "a"},
                                 {"type": "heading", "text": "b"}]}).run().card
    assert card is not None
    assert card.title == "forecast"
    assert "<p>a</p><h3>b</h3>" in card.html


def test_every_call_gets_fresh_card_ids_and_one_accent_per_interface() -> None:
    """Two calls: different scope and output ids, the same accent color."""
    iface = answering({"blocks": [{"type": "text", "text": "a"}]})
    first, second = iface.run().card, iface.run().card
    assert first is not None
    assert second is not None
    assert first.scope_id != second.scope_id
    assert first.output_id != second.output_id
    assert first.accent_color == second.accent_color


def test_open_url_alone_is_a_card_with_that_link() -> None:
    """An http(s) openUrl with no blocks becomes a one-link card and the card's open_url."""
    outcome = answering({"text": "Map ready", "openUrl": "https://maps.test/?q=a&b"}).run()
    card = outcome.card
    assert card is not None
    assert card.open_url == "https://maps.test/?q=a&b"
    assert card.title == "forecast"
    assert ('<a href="https://maps.test/?q=a&amp;b" target="_blank" '
            'rel="noopener noreferrer nofollow">https://maps.test/?q=a&amp;b</a>') in card.html
    assert outcome.text == ('Map ready\n(The person was shown a card: "forecast", which links '
                            "to https://maps.test/?q=a&b.)")


def test_open_url_beside_blocks_is_the_cards_link() -> None:
    """Blocks and an openUrl: the blocks' card, carrying open_url."""
    card = answering({"blocks": [{"type": "text", "text": "a"}],
                      "openUrl": "http://x.test/"}).run().card
    assert card is not None
    assert card.open_url == "http://x.test/"
    assert "<a " not in card.html


def test_a_javascript_open_url_is_dropped() -> None:
    """An openUrl that is not http(s) makes no card and is not mentioned."""
    outcome = answering({"text": "ok", "openUrl": "javascript:alert(1)"}).run()
    assert outcome == ToolOutcome(text="ok")


@pytest.mark.parametrize(("answer", "detail"), [
    (lambda r: httpx.Response(200, text="<html>oops</html>"), "not JSON"),
    (lambda r: httpx.Response(200, json=["text"]), 'must be a JSON object, got ["text"]'),
    (lambda r: httpx.Response(200, json={"blocks": [{"type": "table"}]}),
     "blocks[0].columns: must be an array, got null"),
    (lambda r: httpx.Response(503, text="busy"), "answered HTTP 503: busy"),
])
def test_a_garbage_answer_is_an_error_outcome_never_an_exception(
        answer: Callable[[httpx.Request], httpx.Response], detail: str) -> None:
    """Whatever the interface answers, the model gets an error naming it; counted as failed."""
    iface = Interface(answer)
    outcome = iface.run()
    assert outcome.is_error is True
    assert outcome.card is None
    assert outcome.text.startswith(
        "error: Weather did not answer: POST http://127.0.0.1:9001/execute: ")
    assert detail in outcome.text
    assert iface.count("failed") == 1


def test_an_unreachable_interface_is_an_error_outcome() -> None:
    """Connection refused reaches the model as a sentence, not a stack trace."""
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    iface = Interface(refuse)
    assert iface.run() == ToolOutcome(
        text="error: Weather did not answer: POST http://127.0.0.1:9001/execute: "
             "connection refused", is_error=True)
    assert iface.count("failed") == 1


@pytest.mark.parametrize(("args", "message"), [
    ({}, "error: missing required parameter \"city\" (City name)"),
    ({"city": "Paris", "country": "FR"},
     'error: unknown parameter "country" (accepted: city, days)'),
    ({"city": 3}, 'error: parameter "city" must be a string, got 3'),
    ({"city": "Paris", "days": True}, 'error: parameter "days" must be a number, got true'),
])
def test_arguments_that_do_not_fit_are_refused_without_a_call(
        args: dict[str, Any], message: str) -> None:
    """The model hears what is wrong with its arguments; the interface is not called."""
    iface = answering({"text": "never"})
    assert iface.run(args) == ToolOutcome(text=message, is_error=True)
    assert iface.calls == []


def test_optional_parameters_may_be_left_out_or_null() -> None:
    """Only required parameters must be present; numbers may be ints or floats."""
    iface = answering({"text": "ok"})
    assert iface.run({"city": "Paris", "days": None}).text == "ok"
    assert iface.run({"city": "Paris", "days": 2.5}).text == "ok"
    assert [c["params"] for c in iface.calls] == [{"city": "Paris", "days": None},
                                                   {"city": "Paris", "days": 2.5}]


def test_the_tool_works_without_metrics() -> None:
    """metrics=None is allowed: calls still run."""
    http = httpx.Client(transport=httpx.MockTransport(
        lambda r: httpx.Response(200, json={"text": "ok"})))
    client = InterfaceClient(http, health_timeout_s=1.0, connect_timeout_s=1.0,
                             execute_timeout_s=1.0, max_response_bytes=1000)
    tool = InterfaceTool(interface_id="i", interface_name="N", host="h", port=1,
                         capability=CAPABILITY, client=client, metrics=None)
    assert tool.run({"city": "x"}, CTX) == ToolOutcome(text="ok")
