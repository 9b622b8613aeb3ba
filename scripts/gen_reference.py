#!/usr/bin/env python3
"""Write the generated reference pages of the documentation, or check that they are current.

    .venv/bin/python scripts/gen_reference.py          # write docs/reference/*.md
    .venv/bin/python scripts/gen_reference.py --check  # exit 1 naming each stale page

Each page comes from the code, so that it cannot drift from it (scripts/reference/):
- configuration.md from config/chalie.toml and its comments;
- rest.md from the OpenAPI document that GET /api/openapi.json serves;
- ws-frames.md from the msgspec structs of the /ws frames;
- metrics.md from the Prometheus registry of chalie.metrics.
The output is deterministic (no times, no versions, the same order every run), so a page on
disk that differs from what this would write is stale: tests/test_docs_reference.py fails then.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from reference import configuration, metrics, rest, ws_frames

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
DEFAULTS = ROOT / "config" / "chalie.toml"
COMMAND = "run scripts/gen_reference.py"


def renderers(defaults: Path = DEFAULTS) -> dict[str, Callable[[], str]]:
    """Each page's file name and what makes its text (`defaults`: the TOML file the
    configuration reference is made from)."""
    return {
        "configuration.md": lambda: configuration.render(defaults.read_text(encoding="utf-8")),
        "rest.md": lambda: rest.render(rest.openapi_document()),
        "ws-frames.md": ws_frames.render,
        "metrics.md": lambda: metrics.render(metrics.families()),
    }


def pages(defaults: Path = DEFAULTS) -> dict[str, str]:
    """Each page's file name and the text this would write."""
    return {name: make() for name, make in renderers(defaults).items()}


def stale(directory: Path = REFERENCE, defaults: Path = DEFAULTS) -> list[str]:
    """The pages under `directory` that differ from what this would write (or are missing)."""
    out = []
    for name, text in pages(defaults).items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            out.append(name)
    return out


def write(directory: Path = REFERENCE, defaults: Path = DEFAULTS) -> list[str]:
    """Write every page; the names of those that changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in pages(defaults).items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def stale_message(names: list[str], directory: Path = REFERENCE) -> str:
    where = directory.relative_to(ROOT) if directory.is_relative_to(ROOT) else directory
    lines = [f"{where / name} is stale: it is not what its source makes now" for name in names]
    return "\n".join([*lines, f"{COMMAND} (then commit the pages it writes)"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each page that is not current")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        if names:
            print(stale_message(names), file=sys.stderr)
            return 1
        print(f"docs/reference: {len(renderers())} pages current")
        return 0
    changed = write()
    print(f"docs/reference: {', '.join(changed) if changed else 'nothing'} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
