"""Blocks from an interface: checked, put in normal form, and rendered as a card, all escaped."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from chalie.interfaces.blocks import (
    DEFAULT_ACCENT,
    MAX_TEXT,
    check_blocks,
    gateway_view,
    render_card,
    safe_url,
    valid_accent,
)
from chalie.interfaces.errors import InterfaceError


def body(blocks: list[Any]) -> str:
    """The card's HTML between its head and its end."""
    html, _ = render_card(blocks, tool_name="t", title="T", accent_color="#000",
                          scope_id="s1")
    start = html.index('<div class="chalie-card-body">') + len('<div class="chalie-card-body">')
    assert html.endswith("</div></div>")
    return html[start:-len("</div></div>")]


def error(blocks: Any) -> str:
    with pytest.raises(InterfaceError) as e:
        check_blocks(blocks)
    return str(e.value)


@pytest.mark.parametrize(("block", "html"), [
    ({"type": "text", "text": "Sunny\nthen rain"}, "<p>Sunny\nthen rain</p>"),
    ({"type": "heading", "text": "Paris"}, "<h3>Paris</h3>"),
    ({"type": "heading", "text": "Paris", "level": 3}, "<h5>Paris</h5>"),
    ({"type": "list", "items": ["a", 2, True]}, "<ul><li>a</li><li>2</li><li>true</li></ul>"),
    ({"type": "list", "items": ["a"], "ordered": True}, "<ol><li>a</li></ol>"),
    ({"type": "keyvalue",
      "items": [{"key": "Wind", "value": 12.5}, {"key": "Rain", "value": None}]},
     "<dl><dt>Wind</dt><dd>12.5</dd><dt>Rain</dt><dd></dd></dl>"),
    ({"type": "table", "columns": ["Day", "Max"], "rows": [["Mon", 21], ["Tue", False]]},
     "<table><thead><tr><th>Day</th><th>Max</th></tr></thead><tbody>"
     "<tr><td>Mon</td><td>21</td></tr><tr><td>Tue</td><td>false</td></tr></tbody></table>"),
    ({"type": "image", "url": "https://x.test/a.png", "alt": "Map"},
     '<img src="https://x.test/a.png" alt="Map" loading="lazy" referrerpolicy="no-referrer">'),
    ({"type": "link", "url": "https://x.test/?a=1&b=2", "text": "More"},
     '<p><a href="https://x.test/?a=1&amp;b=2" target="_blank" '
     'rel="noopener noreferrer nofollow">More</a></p>'),
    ({"type": "link", "url": "http://x.test/"},
     '<p><a href="http://x.test/" target="_blank" rel="noopener noreferrer nofollow">'
     "http://x.test/</a></p>"),
    ({"type": "button", "label": "Open", "url": "https://x.test/"},
     '<p><a class="chalie-button" href="https://x.test/" target="_blank" '
     'rel="noopener noreferrer nofollow">Open</a></p>'),
    ({"type": "divider"}, "<hr>"),
    ({"type": "code", "text": "x = 1"}, "<pre><code>x = 1</code></pre>"),
    ({"type": "section", "title": "Week", "blocks": [{"type": "text", "text": "ok"}]},
     '<section><div class="chalie-section-title">Week</div><p>ok</p></section>'),
    ({"type": "section", "blocks": []}, "<section></section>"),
])
def test_each_block_type_renders_as_its_html(block: dict[str, Any], html: str) -> None:
    """Every type of the vocabulary has one fixed rendering."""
    assert body([block]) == html


def test_script_in_any_string_is_escaped() -> None:
    """A <script> sent as text, heading, cell or title is shown as text, never run."""
    evil = "<script>alert('x')</script>"
    html, _ = render_card([
        {"type": "text", "text": evil}, {"type": "heading", "text": evil},
        {"type": "table", "columns": [evil], "rows": [[evil]]},
        {"type": "section", "title": evil, "blocks": [{"type": "code", "text": evil}]},
    ], tool_name=evil, title=evil, accent_color="#fff", scope_id="abc")
    assert "<script" not in html
    assert html.count("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;") == 8


def test_quotes_cannot_break_out_of_an_attribute() -> None:
    """A quote in alt text or a url stays inside its attribute."""
    html = body([{"type": "image", "url": 'https://x.test/"onerror="alert(1)',
                  "alt": '" onload="alert(1)'}])
    assert html == ('<img src="https://x.test/&quot;onerror=&quot;alert(1)" '
                    'alt="&quot; onload=&quot;alert(1)" loading="lazy" '
                    'referrerpolicy="no-referrer">')


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)", "data:text/html,<b>",
    "vbscript:x", "//evil.test/", "/relative", "https://", "http://a b.test/", "java\nscript:x",
    "https://[::1", "ftp://x.test/",
])
def test_urls_other_than_http_are_never_linked(url: str) -> None:
    """A link or button with such a url becomes plain text; an image becomes its alt text."""
    assert safe_url(url) is None
    blocks = [{"type": "link", "url": url, "text": "click"},
              {"type": "button", "label": "press", "url": url},
              {"type": "image", "url": url, "alt": "pic"},
              {"type": "image", "url": url}]
    assert check_blocks(blocks) == [{"type": "text", "text": "click"},
                                    {"type": "text", "text": "press"},
                                    {"type": "text", "text": "pic"}]
    assert body(blocks) == "<p>click</p><p>press</p><p>pic</p>"


def test_a_link_without_text_and_a_bad_url_shows_the_url_escaped() -> None:
    """The url itself becomes the text, harmless."""
    assert body([{"type": "link", "url": "javascript:<b>"}]) == "<p>javascript:&lt;b&gt;</p>"


def test_http_and_https_urls_with_hosts_are_safe() -> None:
    """Ordinary web addresses, IPv6 ones included, pass as they are."""
    for url in ("http://x.test", "HTTPS://x.test/a?b=c#d", "http://[::1]:8080/"):
        assert safe_url(url) == url


def test_unknown_types_show_their_text_or_nothing() -> None:
    """A type this Chalie does not know renders its text field, escaped, or is left out."""
    blocks = [{"type": "markdown", "text": "**<b>hi</b>**"}, {"type": "chart", "points": [1]},
              {"type": "video", "text": 3}]
    assert check_blocks(blocks) == [{"type": "text", "text": "**<b>hi</b>**"}]
    assert body(blocks) == "<p>**&lt;b&gt;hi&lt;/b&gt;**</p>"


def test_long_strings_are_cut_with_an_ellipsis() -> None:
    """A string over 10,000 characters keeps 9,999 of them and ends with '…'."""
    checked = check_blocks([{"type": "text", "text": "a" * 20_000},
                            {"type": "text", "text": "b" * MAX_TEXT}])
    assert checked[0]["text"] == "a" * (MAX_TEXT - 1) + "…"
    assert checked[1]["text"] == "b" * MAX_TEXT


def test_at_most_200_blocks_counting_those_in_sections() -> None:
    """199 top-level blocks and a section holding one more is 201: refused."""
    fine = [{"type": "divider"}] * 199 + [{"type": "section", "blocks": []}]
    assert len(check_blocks(fine)) == 200
    too_many = [{"type": "divider"}] * 199 + [{"type": "section",
                                               "blocks": [{"type": "divider"}]}]
    assert error(too_many) == (
        "blocks[199].blocks[0]: at most 200 blocks in all (those inside sections count)")


def test_sections_nest_at_most_four_deep() -> None:
    """Four sections inside each other render; a fifth is refused."""
    def nested(depth: int) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": "core"}
        for _ in range(depth):
            block = {"type": "section", "blocks": [block]}
        return block

    assert body([nested(4)]) == "<section>" * 4 + "<p>core</p>" + "</section>" * 4
    assert error([nested(5)]) == (
        "blocks[0].blocks[0].blocks[0].blocks[0].blocks[0]: sections nest at most 4 deep")


@pytest.mark.parametrize(("blocks", "message"), [
    ({"type": "text"}, 'blocks: must be an array of blocks, got {"type":"text"}'),
    (["hello"], 'blocks[0]: must be a block object, got "hello"'),
    ([{"text": "x"}], "blocks[0].type: must be a string, got null"),
    ([{"type": "text", "text": 5}], "blocks[0].text: must be a string, got 5"),
    ([{"type": "heading", "text": "x", "level": 4}], "blocks[0].level: must be 1, 2 or 3, got 4"),
    ([{"type": "heading", "text": "x", "level": True}],
     "blocks[0].level: must be 1, 2 or 3, got true"),
    ([{"type": "list", "items": "a,b"}], 'blocks[0].items: must be an array, got "a,b"'),
    ([{"type": "list", "items": [["a"]]}], 'blocks[0].items[0]: must be a string, got ["a"]'),
    ([{"type": "list", "items": [], "ordered": "yes"}],
     "blocks[0].ordered: must be true or false"),
    ([{"type": "keyvalue", "items": [{"key": "k", "value": {"a": 1}}]}],
     'blocks[0].items[0].value: must be a string, number, boolean or null, got {"a":1}'),
    ([{"type": "table", "columns": ["a", "b"], "rows": [["x"]]}],
     'blocks[0].rows[0]: must be an array of 2 cells, one a column, got ["x"]'),
    ([{"type": "table", "columns": [str(i) for i in range(21)], "rows": []}],
     "blocks[0].columns: at most 20, got 21"),
    ([{"type": "list", "items": ["a"] * 501}], "blocks[0].items: at most 500, got 501"),
    ([{"type": "image", "alt": "x"}], "blocks[0].url: must be a string, got null"),
    ([{"type": "button", "url": "https://x.test"}], "blocks[0].label: must be a string, got null"),
    ([{"type": "section", "title": 1, "blocks": []}], "blocks[0].title: must be a string, got 1"),
])
def test_malformed_blocks_name_the_place(blocks: Any, message: str) -> None:
    """A block that does not fit its type fails with the path to the bad field."""
    assert error(blocks) == message


def test_normal_form_drops_unknown_fields_and_fills_defaults() -> None:
    """What the gateway hands on has exactly the vocabulary's fields."""
    raw = msgspec.json.encode([
        {"type": "heading", "text": "H", "onclick": "x"},
        {"type": "list", "items": [1]},
        {"type": "link", "url": "https://x.test", "style": "color:red"},
        {"type": "section", "blocks": [{"type": "divider", "html": "<b>"}]},
    ])
    assert gateway_view(raw) == [
        {"type": "heading", "text": "H", "level": 1},
        {"type": "list", "items": ["1"], "ordered": False},
        {"type": "link", "url": "https://x.test", "text": "https://x.test"},
        {"type": "section", "title": None, "blocks": [{"type": "divider"}]},
    ]


def test_gateway_view_refuses_what_is_not_a_block_array() -> None:
    """Not JSON, or JSON of another shape, is an InterfaceError."""
    with pytest.raises(InterfaceError, match=r"^blocks: not JSON"):
        gateway_view(b"<html></html>")
    with pytest.raises(InterfaceError, match=r"^blocks: must be an array of blocks"):
        gateway_view(b'{"blocks": []}')


def test_the_card_is_wrapped_and_its_css_scoped_to_it() -> None:
    """The card's div carries its scope class; every CSS rule starts with that class."""
    html, css = render_card([{"type": "text", "text": "hi"}], tool_name="forecast",
                            title="Paris & Lyon", accent_color="#12abEF", scope_id="f00d")
    assert html == (
        '<div class="chalie-card chalie-card-f00d"><div class="chalie-card-head">'
        '<span class="chalie-card-title">Paris &amp; Lyon</span>'
        '<span class="chalie-card-tool">forecast</span></div>'
        '<div class="chalie-card-body"><p>hi</p></div></div>')
    rules = [line for line in css.splitlines() if line and not line.startswith(" ")]
    assert rules
    assert all(rule.startswith(".chalie-card-f00d") for rule in rules)
    assert "#12abEF" in css
    assert "ACCENT" not in css
    assert "SCOPE" not in css


@pytest.mark.parametrize("color", ["red", "#12345", "#1234567", "#ggg", "#fff;}body{x:y",
                                   "", "#fff\n"])
def test_a_bad_accent_color_falls_back_to_the_default(color: str) -> None:
    """Only #rgb and #rrggbb reach the stylesheet."""
    assert valid_accent(color) == DEFAULT_ACCENT
    _, css = render_card([], tool_name="t", title="t", accent_color=color, scope_id="a")
    assert DEFAULT_ACCENT in css
    assert "}body" not in css


def test_good_accent_colors_are_kept() -> None:
    """Short and long hex colors pass."""
    assert valid_accent("#abc") == "#abc"
    assert valid_accent("#A0B1C2") == "#A0B1C2"


def test_a_scope_id_that_could_inject_css_is_refused() -> None:
    """scope_id is Chalie's own; anything but a plain token is a programming error."""
    with pytest.raises(ValueError, match="scope_id"):
        render_card([], tool_name="t", title="t", accent_color="#fff", scope_id="a{}b")
