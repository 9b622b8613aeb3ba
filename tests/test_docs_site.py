"""The front pages outside docs/ (mkdocs build --strict checks the site's own links; scripts/test
runs it): the README stays a front page, and every link from these files leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRONT = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md", "contrib/README.md")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    first = text.split("\n## ", 1)[0]
    assert "scripts/serve" in first
    assert "scripts/test" in first
    assert not re.search(r"\bissue \d+", text, re.IGNORECASE), "history belongs in CHANGELOG.md"


@pytest.mark.parametrize("name", FRONT)
def test_every_relative_link_leads_to_a_file(name: str) -> None:
    page = ROOT / name
    broken = []
    for target in _LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # another site, or a place on this page
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{name} links to files that are not there: {broken}"
