"""renderMarkdown (static/markdown.js) in the browser: right for what answers hold, and safe
for anything a model could write."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import connected, login
from tests.integration.harness import ServerProcess

Shot = Callable[[WebDriver, str], Path]
Tree = dict[str, Any] | str  # an element {"t": tag, "a": {attrs}, "c": [children]} or a text

# Renders every source with the page's own module and returns each result as a tree parsed in
# an inert document (no script runs and nothing loads while it is looked at), with the time
# rendering took.
RENDER = """
const [sources, done] = arguments;
import('/static/markdown.js').then((mod) => {
  const tree = (node) => node.nodeType === Node.TEXT_NODE ? node.data : {
    t: node.nodeName.toLowerCase(),
    a: Object.fromEntries([...(node.attributes || [])].map((a) => [a.name, a.value])),
    c: [...node.childNodes].filter((n) => n.nodeType === Node.ELEMENT_NODE ||
                                          n.nodeType === Node.TEXT_NODE).map(tree),
  };
  done(sources.map((source) => {
    const started = performance.now();
    let result;
    try {
      result = mod.renderMarkdown(source);
    } catch (error) {
      return {error: String(error && error.stack || error)};
    }
    const ms = performance.now() - started;
    const doc = document.implementation.createHTMLDocument('');
    const box = doc.createElement('div');
    if (typeof result === 'string') {
      box.innerHTML = result;
    } else if (result instanceof Node) {
      box.append(doc.importNode(result, true));
    } else {
      return {error: 'renderMarkdown returned ' + Object.prototype.toString.call(result)};
    }
    return {tree: tree(box), ms};
  }));
}, (error) => done([{error: 'import failed: ' + error}]));
"""


def elements(tree: Tree, tag: str | None = None) -> list[dict[str, Any]]:
    """Every element under `tree` (not itself), or only those named `tag`, in document order."""
    if isinstance(tree, str):
        return []
    out = []
    for child in tree["c"]:
        if isinstance(child, dict):
            if tag is None or child["t"] == tag:
                out.append(child)
            out += elements(child, tag)
    return out


def text(tree: Tree) -> str:
    return tree if isinstance(tree, str) else "".join(text(c) for c in tree["c"])


def children(tree: dict[str, Any], tag: str) -> list[dict[str, Any]]:
    return [c for c in tree["c"] if isinstance(c, dict) and c["t"] == tag]


def dangerous_url(value: str) -> bool:
    """A URL a browser would run or open as a document: javascript:, vbscript:, data:."""
    squeezed = re.sub(r"[\x00-\x20]", "", value).lower()
    return squeezed.startswith(("javascript:", "vbscript:", "data:"))


def assert_safe(tree: Tree, source: str) -> None:
    """No element that runs script or loads from elsewhere, no handler, no dangerous URL."""
    for el in elements(tree):
        assert el["t"] not in ("script", "iframe", "object", "embed", "style", "link", "meta",
                               "base", "form", "input", "svg", "math", "template"), (source, el)
        for name, value in el["a"].items():
            assert not name.startswith("on"), (source, el)
            assert name not in ("style", "srcdoc", "formaction"), (source, el)
            if name in ("href", "src", "xlink:href", "action", "poster", "srcset"):
                assert not dangerous_url(value), (source, el)
        if el["t"] == "img":
            assert not re.match(r"(?i)\s*(https?:)?//", el["a"].get("src", "")), (source, el)
        if el["t"] == "a" and el["a"].get("target") == "_blank":
            assert "noopener" in el["a"].get("rel", ""), (source, el)


def check_bold(tree: Tree) -> None:
    assert [text(s) for s in elements(tree, "strong")] == ["bold"]
    assert elements(tree, "b") == []
    assert "<b>raw</b>" in text(tree)


def check_shown_as_text(markup: str) -> Callable[[Tree], None]:
    def check(tree: Tree) -> None:
        assert markup in text(tree), text(tree)
    return check


def check_no_link_to_run(tree: Tree) -> None:
    assert "click" in text(tree)
    for a in elements(tree, "a"):
        assert not dangerous_url(a["a"].get("href", "")), a


def check_link(tree: Tree) -> None:
    [a] = elements(tree, "a")
    assert a["a"]["href"] == "https://example.com/a?b=1&c=2"
    assert text(a) == "site"


def check_code_block(tree: Tree) -> None:
    [pre] = elements(tree, "pre")
    [code] = elements(pre, "code")
    assert text(code).rstrip("\n") == "<b>x</b> **not bold** <script>y</script>\n  indented"
    assert elements(code) == [] or all(e["t"] == "span" for e in elements(code))
    assert not elements(tree, "b")
    assert not elements(tree, "strong")


def check_inline_code(tree: Tree) -> None:
    [code] = elements(tree, "code")
    assert text(code) == "<i>x</i> *y*"
    assert not elements(tree, "i")
    assert not elements(tree, "em")
    assert text(tree).startswith("Use ")
    assert text(tree).endswith(" here")


def check_nested_list(tree: Tree) -> None:
    top = elements(tree, "ul")[0]  # document order: the outer list first
    items = children(top, "li")
    assert len(items) == 2, top
    [inner] = elements(items[0], "ul")
    assert [text(li).strip() for li in children(inner, "li")] == ["b", "c"]
    assert text(items[0]).strip().startswith("a")
    assert text(items[1]).strip() == "d"
    assert elements(items[1], "ul") == []


def check_ordered_list(tree: Tree) -> None:
    [ol] = elements(tree, "ol")
    assert [text(li).strip() for li in children(ol, "li")] == ["one", "two", "three"]


def check_table(tree: Tree) -> None:
    [table] = elements(tree, "table")
    assert [text(th).strip() for th in elements(table, "th")] == ["a", "b"]
    assert [text(td).strip() for td in elements(table, "td")] == ["1", "<i>2</i>", "3", "4"]
    assert not elements(table, "i")


def check_plain(tree: Tree) -> None:
    assert text(tree).strip() == 'a & b < c > d "q" \'r\''


def check_emphasis(tree: Tree) -> None:
    assert [text(e) for e in elements(tree, "em")] == ["em"]


def check_heading(tree: Tree) -> None:
    headings = [e for e in elements(tree) if re.fullmatch(r"h[1-6]", e["t"])]
    assert [text(h).strip() for h in headings] == ["Title"]


def check_empty(tree: Tree) -> None:
    assert text(tree).strip() == ""


def check_no_external_image(tree: Tree) -> None:
    for img in elements(tree, "img"):
        assert "evil.example" not in img["a"].get("src", "")


def check_raw_link_is_text(tree: Tree) -> None:
    assert elements(tree, "a") == []
    assert '<a href="javascript:alert(1)">x</a>' in text(tree)


def check_anything(tree: Tree) -> None:
    pass


CASES: list[tuple[str, str, Callable[[Tree], None]]] = [
    ("bold-and-raw-html", "**bold** and <b>raw</b>", check_bold),
    ("script-tag", "<script>alert(1)</script>", check_shown_as_text("<script>alert(1)</script>")),
    ("img-onerror", "<img src=x onerror=alert(1)>", check_shown_as_text("<img src=x onerror")),
    ("raw-link", '<a href="javascript:alert(1)">x</a>', check_raw_link_is_text),
    ("javascript-link", "[click](javascript:alert(1))", check_no_link_to_run),
    ("mixed-case-scheme", "[click](JaVaScRiPt:alert(1))", check_no_link_to_run),
    ("spaced-scheme", "[click]( javascript:alert(1))", check_no_link_to_run),
    ("entity-scheme", "[click](jav&#x09;ascript:alert(1))", check_no_link_to_run),
    ("tab-scheme", "[click](java\tscript:alert(1))", check_no_link_to_run),
    ("data-link", "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
     check_no_link_to_run),
    ("vbscript-link", "[click](vbscript:msgbox(1))", check_no_link_to_run),
    ("quote-in-url", '[click](https://a.example/" onmouseover="alert(1))', check_anything),
    ("link", "[site](https://example.com/a?b=1&c=2)", check_link),
    ("external-image", "![pic](https://evil.example/x.png)", check_no_external_image),
    ("code-block", "```\n<b>x</b> **not bold** <script>y</script>\n  indented\n```",
     check_code_block),
    ("inline-code", "Use `<i>x</i> *y*` here", check_inline_code),
    ("nested-list", "- a\n  - b\n  - c\n- d", check_nested_list),
    ("ordered-list", "1. one\n2. two\n3. three", check_ordered_list),
    ("table", "| a | b |\n|---|---|\n| 1 | <i>2</i> |\n| 3 | 4 |", check_table),
    ("plain-specials", "a & b < c > d \"q\" 'r'", check_plain),
    ("emphasis", "an *em* word", check_emphasis),
    ("heading", "# Title", check_heading),
    ("empty", "", check_empty),
]
# Inputs that make a careless renderer backtrack: each must come back quickly.
SLOW = ["a" + "*" * 5000 + " b", "[](" * 3000, "`" * 5000, "- " * 3000 + "x", "_" * 5000,
        "<" * 5000, "|" * 3000 + "\n" + "|---" * 1000]


@pytest.fixture
def rendered(browser: WebDriver, server: ServerProcess) -> Callable[[list[str]], list[Any]]:
    login(browser, server)
    connected(browser)
    browser.set_script_timeout(60)

    def render(sources: list[str]) -> list[Any]:
        results: list[Any] = browser.execute_async_script(RENDER, sources)
        return results

    return render


def test_markdown_is_rendered_right_and_safely(
    browser: WebDriver, rendered: Callable[[list[str]], list[Any]], shot: Shot
) -> None:
    """Each source renders without an error, holds nothing that could run or load, and reads
    as Markdown says."""
    results = rendered([source for _, source, _ in CASES])
    assert len(results) == len(CASES), results
    failures = []
    for (name, source, check), result in zip(CASES, results, strict=True):
        if "error" in result:
            failures.append(f"{name}: {result['error']}")
            continue
        try:
            assert_safe(result["tree"], source)
            check(result["tree"])
        except AssertionError as e:
            failures.append(f"{name}: {source!r} -> {result['tree']} ({e})")
    shot(browser, "page")
    assert not failures, "\n".join(failures)


def test_pathological_markdown_renders_quickly(
    rendered: Callable[[list[str]], list[Any]]
) -> None:
    """No input of a few thousand characters takes the renderer more than half a second."""
    results = rendered(SLOW)
    for source, result in zip(SLOW, results, strict=True):
        assert "error" not in result, (source[:20], result)
        assert_safe(result["tree"], source[:20])
        assert result["ms"] < 500, (source[:20], result["ms"])
