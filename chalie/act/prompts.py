"""Prompt files from prompts/, checked once at start-up and rendered per call."""

from __future__ import annotations

from pathlib import Path
from string import Template

from chalie.errors import PromptError
from chalie.paths import PROMPTS

# file -> the placeholders its caller fills in
_EXPECTED: dict[str, frozenset[str]] = {
    "act_system": frozenset({"now"}),
    "act_user": frozenset({"state", "memory", "history", "user_text", "trail"}),
    "act_final": frozenset(),
    "compact_trail": frozenset({"user_text", "trail"}),
    "checkpoint": frozenset({"state", "history", "user_text", "trail"}),
}


class Prompts:
    def __init__(self, templates: dict[str, Template]) -> None:
        self._templates = templates

    @classmethod
    def load(cls, directory: Path = PROMPTS) -> Prompts:
        templates = {}
        for name, expected in _EXPECTED.items():
            path = directory / f"{name}.md"
            try:
                template = Template(path.read_text(encoding="utf-8"))
            except OSError as e:
                raise PromptError(f"cannot read prompt {path}: {e}") from e
            unknown = set(template.get_identifiers()) - expected
            if unknown or not template.is_valid():
                raise PromptError(
                    f"prompt {path} uses unknown placeholders {sorted(unknown)}; "
                    f"allowed: {sorted(expected)}"
                )
            templates[name] = template
        return cls(templates)

    def render(self, name: str, **values: str) -> str:
        return self._templates[name].substitute(values).strip()
