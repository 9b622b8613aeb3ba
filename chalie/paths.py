"""Where the project's own files live: the shipped defaults and the prompts."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "config" / "chalie.toml"
PROMPTS = ROOT / "prompts"
