"""The reference pages of the documentation (docs/reference/) are what scripts/gen_reference.py
makes from the code as it is: a setting, route, frame or metric added without running it fails
here, with the command that brings the pages up to date."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gen_reference  # noqa: E402
from reference import configuration  # noqa: E402

DEFAULTS = ROOT / "config" / "chalie.toml"


def test_the_reference_pages_are_what_the_code_makes_now() -> None:
    """Each of the four pages on disk is exactly what the generator would write."""
    names = gen_reference.stale()
    assert names == [], gen_reference.stale_message(names)


def test_a_setting_added_without_regenerating_makes_the_configuration_page_stale(
    tmp_path: Path,
) -> None:
    """A commented key added to a copy of config/chalie.toml shows up in configuration.md with
    its default, environment variable and comment, so the page on disk is stale, and the
    message says which page and what to run."""
    text = DEFAULTS.read_text(encoding="utf-8")
    assert "\n[server]\n" in text
    added = text.replace("\n[server]\n", "\n[server]\n# Seconds a new thing waits.\n"
                         "new_wait_s = 7.5\n", 1)
    copy = tmp_path / "chalie.toml"
    copy.write_text(added, encoding="utf-8")

    page = gen_reference.renderers(copy)["configuration.md"]()
    assert "| `server.new_wait_s` | `7.5` | float | `CHALIE_SERVER__NEW_WAIT_S` | restart |" \
        in page
    assert "Seconds a new thing waits." in page
    names = gen_reference.stale(defaults=copy)
    assert names == ["configuration.md"]
    message = gen_reference.stale_message(names)
    assert "docs/reference/configuration.md is stale" in message
    assert "run scripts/gen_reference.py" in message


def test_every_key_of_the_defaults_is_in_the_configuration_page() -> None:
    """Every key config/chalie.toml sets is listed by its dotted name, with its default."""
    data = tomllib.loads(DEFAULTS.read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    keys = [(f"{section}.{key}", value) for section, values in data.items()
            for key, value in values.items() if not isinstance(value, dict)]
    keys += [(f"llm.{job}.{key}", value) for job in ("primary", "light")
             for key, value in data["llm"][job].items()]
    missing = [key for key, value in keys
               if f"`{key}`" not in page or f"`{configuration.toml_value(value)}`" not in page]
    assert len(keys) > 150
    assert missing == []


def test_comments_are_read_as_the_file_arranges_them() -> None:
    """The file's introduction, a table's introduction (before a `#` line alone), a comment
    shared by the keys under it, a comment at the end of a line, and a value over several
    lines each land where they belong."""
    text = """# The file says what it is.

[server]
# What the server table is for.
#
# Where it listens.
host = "127.0.0.1"
port = 8081  # 0: any free port
rest_rate_per_min = [1,
    2]
# Largest frame.
max_frame_bytes = 65536
"""
    page = configuration.render(text)
    assert page.index("The file says what it is.") < page.index("## server {#server}") \
        < page.index("What the server table is for.") < page.index("### host, port") \
        < page.index("Where it listens.") < page.index("`server.port`: 0: any free port") \
        < page.index("### max\\_frame\\_bytes {#server-max_frame_bytes}") \
        < page.index("Largest frame.")
    assert "### host, port, rest\\_rate\\_per\\_min {#server-host}" in page
    assert "| `server.port`{#server-port} | `8081` | integer |" in page


def test_the_generated_pages_are_the_reference_pages_of_the_site() -> None:
    """docs/reference/ holds the generated pages and nothing else, and the site's nav lists
    each of them."""
    names = sorted(gen_reference.renderers())
    assert sorted(p.name for p in (ROOT / "docs" / "reference").iterdir()) == names
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert [n for n in names if f"reference/{n}" not in nav] == []
