"""The shape of the code, kept by tools (docs/architecture.md): every import goes down a
floor and nothing imports in a circle (import-linter's contracts in pyproject.toml, which
scripts/test also runs), and every module is a room a newcomer can read."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# import-linter lives in a venv of its own (scripts/_lint_venv.sh, which scripts/test sources).
LINT_IMPORTS = ROOT / ".venv-lint" / "bin" / "lint-imports"
MAX_LINES = 400
Plant = Callable[[str, str], subprocess.CompletedProcess[str]]
# Modules allowed past MAX_LINES, each one wire format or one table of data, and why.
LONGER: dict[str, str] = {}


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contracts, on the `chalie` package found under `tree`."""
    if not LINT_IMPORTS.exists():
        pytest.skip("import-linter is not installed: run scripts/test (it makes .venv-lint)")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
        timeout=120, check=False,
    )


@pytest.fixture
def planted(tmp_path: Path) -> Plant:
    """Lint a copy of the package with `text` added at the end of one of its files (made if
    it is new)."""

    def plant(file: str, text: str) -> subprocess.CompletedProcess[str]:
        shutil.copytree(ROOT / "chalie", tmp_path / "chalie",
                        ignore=shutil.ignore_patterns("__pycache__", "static", "migrations"))
        path = tmp_path / file
        path.write_text((path.read_text() if path.exists() else "") + "\n" + text + "\n")
        return lint(tmp_path)

    return plant


def test_every_import_goes_down_and_nothing_imports_in_a_circle() -> None:
    """The code as it is keeps all three contracts: floors, the core below the actors, no
    circles."""
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_an_import_from_the_store_up_to_the_actors_is_named(planted: Plant) -> None:
    """A store module importing an actor breaks the floors, and the output names the import
    and its line."""
    result = planted("chalie/store/db.py", "from chalie.actors.session import Session  # noqa")
    assert result.returncode == 1
    assert "chalie.store is not allowed to import chalie.actors" in result.stdout
    assert "- chalie.store.db -> chalie.actors.session (l." in result.stdout


def test_a_type_only_import_counts(planted: Plant) -> None:
    """An import under TYPE_CHECKING is no way around the floors: the core importing the edge
    for a type is named like any other."""
    result = planted("chalie/memory/recall.py", "from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from chalie.edge.ws import ChatSocket  # noqa")
    assert result.returncode == 1
    assert "- chalie.memory.recall -> chalie.edge.ws (l." in result.stdout
    assert "The core never imports the actors or the edge BROKEN" in result.stdout


def test_a_circle_between_two_packages_of_one_floor_is_named(planted: Plant) -> None:
    """llm importing memory (which imports llm) stays on the core's floor but makes a circle;
    the output names the import that would break it."""
    result = planted("chalie/llm/types.py", "import chalie.memory.recall  # noqa")
    assert result.returncode == 1
    assert "No cycles are allowed in chalie." in result.stdout
    assert "- .llm -> .memory (1 import)" in result.stdout


def test_a_new_module_must_be_given_a_floor(planted: Plant) -> None:
    """A new top-level module is refused until pyproject.toml says which floor it is on."""
    result = planted("chalie/gadget.py", '"""A module nobody placed."""')
    assert result.returncode == 1
    assert "- chalie.gadget" in result.stdout


def test_every_module_is_a_room_a_newcomer_can_read() -> None:
    """No module of the package is over MAX_LINES lines, unless LONGER says which wire format
    or table of data it is."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for p in sorted((ROOT / "chalie").rglob("*.py"))}
    too_long = {path: n for path, n in sizes.items() if n > MAX_LINES and path not in LONGER}
    assert too_long == {}
    assert all(sizes.get(path, 0) > MAX_LINES for path in LONGER), "LONGER lists a short file"
