"""Property: whatever strings an interface puts in its blocks, the card's markup is Chalie's own."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chalie.interfaces.blocks import render_card

NASTY = st.text(alphabet=st.sampled_from(list("<>&\"'ab =/:;\n")) | st.characters(),
                max_size=40)
URLS = NASTY | st.builds(lambda s: "https://x.test/" + s, NASTY) | st.sampled_from(
    ["javascript:alert(1)", "data:text/html,<script>", "http://ok.test/?a=1&b=<2>"])
CELLS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                               allow_infinity=False) | NASTY

LEAVES = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": NASTY}),
    st.fixed_dictionaries({"type": st.just("code"), "text": NASTY}),
    st.fixed_dictionaries({"type": st.just("heading"), "text": NASTY,
                           "level": st.sampled_from([1, 2, 3])}),
    st.fixed_dictionaries({"type": st.just("list"), "items": st.lists(NASTY, max_size=3),
                           "ordered": st.booleans()}),
    st.fixed_dictionaries({"type": st.just("keyvalue"), "items": st.lists(
        st.fixed_dictionaries({"key": NASTY, "value": CELLS}), max_size=3)}),
    st.integers(0, 3).flatmap(lambda n: st.fixed_dictionaries({
        "type": st.just("table"), "columns": st.lists(NASTY, min_size=n, max_size=n),
        "rows": st.lists(st.lists(CELLS, min_size=n, max_size=n), max_size=3)})),
    st.fixed_dictionaries({"type": st.just("image"), "url": URLS, "alt": NASTY}),
    st.fixed_dictionaries({"type": st.just("link"), "url": URLS, "text": NASTY}),
    st.fixed_dictionaries({"type": st.just("button"), "url": URLS, "label": NASTY}),
    st.fixed_dictionaries({"type": st.just("divider")}),
    st.fixed_dictionaries({"type": NASTY, "text": NASTY}),  # mostly types nobody knows
)


def blocks_at(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    if depth == 4:
        return LEAVES
    section = st.fixed_dictionaries({"type": st.just("section"), "title": st.none() | NASTY,
                                     "blocks": st.lists(blocks_at(depth + 1), max_size=3)})
    return LEAVES | section


CHALIE_TAGS = {"div", "span", "p", "h3", "h4", "h5", "ul", "ol", "li", "dl", "dt", "dd",
               "table", "thead", "tbody", "tr", "th", "td", "img", "a", "hr", "pre", "code",
               "section"}
CHALIE_ATTRS = {"class", "href", "src", "alt", "target", "rel", "loading", "referrerpolicy"}
URL_RE = re.compile(r"https?://[^\x00-\x20\x7f]+$", re.IGNORECASE)
TAG_RE = re.compile(r"</?(?:" + "|".join(CHALIE_TAGS) + r")(?: [a-z-]+=\"[^\"<>]*\")*>")


class Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.data: list[str] = []
        self.other: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.data.append(data)

    def handle_comment(self, data: str) -> None:
        self.other.append(data)

    def handle_decl(self, decl: str) -> None:
        self.other.append(decl)

    def handle_pi(self, data: str) -> None:
        self.other.append(data)


def texts(value: Any) -> list[str]:
    """Every string shown as text: text, items, keys, cells, columns, titles, labels."""
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in ("type", "url", "alt")
                for s in texts(v)]
    if isinstance(value, list):
        return [s for v in value for s in texts(v)]
    return [value] if isinstance(value, str) else []


@settings(derandomize=True, database=None, max_examples=300, deadline=None)
@given(blocks=st.lists(blocks_at(1), max_size=3), title=NASTY, tool_name=NASTY)
def test_no_interface_string_ever_becomes_markup(
        blocks: list[dict[str, Any]], title: str, tool_name: str) -> None:
    """Only Chalie's own tags and attributes appear, links are http(s), every text is shown."""
    html, _ = render_card(blocks, tool_name=tool_name, title=title, accent_color="#abc",
                          scope_id="p1")
    assert "<" not in TAG_RE.sub("", html)
    assert ">" not in TAG_RE.sub("", html)
    markup = Markup()
    markup.feed(html)
    markup.close()
    assert markup.other == []
    for tag, attrs in markup.tags:
        assert tag in CHALIE_TAGS
        for name, value in attrs:
            assert name in CHALIE_ATTRS
            if name in ("href", "src"):
                assert value is not None
                assert URL_RE.match(value)
    shown = "".join(markup.data)
    for text in [title, tool_name, *texts(blocks)]:
        assert text in shown
