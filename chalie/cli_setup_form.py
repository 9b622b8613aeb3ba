"""What `chalie setup` fills in: the model settings of one table, and the presets that fill it.

The table is [llm] (every job's model: the default), a job's own ([llm.primary], [llm.light]),
or a job's fallback ([llm.primary.fallback]). Its five keys are the ones the browser's setup card
asks for: provider, base_url, api_key, model, context_window. The presets are the card's, with
the same labels and addresses; `name` is what `--preset` takes.

A Form holds the settings as configured now (every layer: chalie/settings.py) and the changes
chosen so far; it knows which keys the environment locks. One rule protects an API key: it
belongs to the server it was given for, so when the address moves to another server (scheme,
host or port) and no new key is given, the key is cleared rather than sent there.
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from chalie import settings
from chalie.config import Config, LlmConfig
from chalie.config_load import load_config

KEYS = ("provider", "base_url", "api_key", "model", "context_window")
PROVIDERS = ("openai", "anthropic", "llamacpp")
SECRET_MIN = 8  # characters: a shorter value is no key, and blanking it would blank words


@dataclass(frozen=True)
class Preset:
    name: str  # what --preset takes
    label: str  # as the browser's setup card shows it
    provider: str
    base_url: str  # "" for llamacpp: the model is a file, there is no address


GGUF = Preset("gguf", "A GGUF file run in this process (llama.cpp)", "llamacpp", "")
CUSTOM = Preset("custom", "Another OpenAI-compatible server", "openai", "")
PRESETS: tuple[Preset, ...] = (
    Preset("ollama", "Ollama", "openai", "http://127.0.0.1:11434/v1"),
    Preset("llama-server", "llama.cpp server", "openai", "http://127.0.0.1:8080/v1"),
    Preset("vllm", "vLLM", "openai", "http://127.0.0.1:8000/v1"),
    Preset("lmstudio", "LM Studio", "openai", "http://127.0.0.1:1234/v1"),
    Preset("openai", "OpenAI", "openai", "https://api.openai.com/v1"),
    Preset("openrouter", "OpenRouter", "openai", "https://openrouter.ai/api/v1"),
    Preset("deepseek", "DeepSeek", "openai", "https://api.deepseek.com/v1"),
    # The Messages API lives under /v1 (chalie/llm/anthropic.py posts to {base_url}/messages).
    Preset("anthropic", "Anthropic", "anthropic", "https://api.anthropic.com/v1"),
    GGUF,
    CUSTOM,
)


def local_extra() -> bool:
    """Whether the `local` extra (xllamacpp) is installed: a GGUF can run in process."""
    return importlib.util.find_spec("xllamacpp") is not None


def offered() -> tuple[Preset, ...]:
    """The presets this installation can run."""
    return tuple(p for p in PRESETS if p is not GGUF or local_extra())


def preset_named(name: str) -> Preset:
    return next(p for p in PRESETS if p.name == name)


def preset_for(provider: str, base_url: str) -> Preset:
    """The preset the current settings match; CUSTOM (or Anthropic at its own address) else."""
    if provider == "llamacpp":
        return GGUF
    for p in PRESETS:
        if p.provider == provider and p.base_url and same_url(p.base_url, base_url):
            return p
    return preset_named("anthropic") if provider == "anthropic" else CUSTOM


def same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def origin(url: str) -> str:
    """scheme://host:port: the server an address (and its API key) belongs to."""
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def table_for(job: str | None, fallback: bool) -> str:
    """The table `--job` and `--fallback` name: a fallback is the primary's unless job says."""
    if fallback:
        return f"llm.{job or 'primary'}.fallback"
    return f"llm.{job}" if job else "llm"


def resolved(llm: LlmConfig, table: str) -> LlmConfig:
    """The settings a table's model runs with: a job's keys over [llm]'s, a fallback's over
    its job's; a job that has no fallback yet starts from the job's own."""
    parts = table.split(".")
    if len(parts) == 1:
        return llm
    job = llm.job(parts[1], fallback=len(parts) == 3)
    return job if job is not None else llm.job(parts[1]) or llm


@dataclass
class Form:
    """The settings of one table as they are, and the changes chosen for it."""

    table: str
    config_file: Path | None
    config: Config  # as configured now
    saved: dict[str, Any]  # settings.toml as it is
    env: Mapping[str, str]
    changes: dict[str, Any] = field(default_factory=dict)  # dotted key -> value

    def key(self, name: str) -> str:
        return f"{self.table}.{name}"

    def locked(self, name: str) -> str | None:
        """The environment variable that sets this key, when one does (it cannot be saved)."""
        var = settings.env_name(self.key(name))
        return var if var in self.env else None

    def current(self, name: str) -> Any:
        """The value in effect for the table now."""
        return getattr(resolved(self.config.llm, self.table), name)

    def value(self, name: str) -> Any:
        """The value it will have: the change chosen, or the current one."""
        return self.changes.get(self.key(name), self.current(name))

    def set(self, name: str, value: Any) -> None:
        self.changes[self.key(name)] = value

    def changed(self, name: str) -> bool:
        return self.key(name) in self.changes

    def locked_changes(self) -> list[tuple[str, str]]:
        """(key, variable) of each change the environment would override."""
        return [(k, settings.env_name(k)) for k in sorted(self.changes)
                if settings.env_name(k) in self.env]

    def merged(self) -> dict[str, Any]:
        """settings.toml as it would be with the changes."""
        out = copy.deepcopy(self.saved)
        for key, value in self.changes.items():
            settings.put(out, key, value)
        return out

    def candidate(self) -> Config:
        """The config as it would be (ConfigError when the changes do not load)."""
        return load_config(self.config_file, env=self.env, saved=self.merged())

    def secrets(self) -> list[str]:
        """Every API key in play: the ones configured and the one chosen."""
        llm = self.config.llm
        found = [llm.api_key, *(str(v) for k, v in self.changes.items() if k in settings.SECRETS)]
        for job in ("primary", "light"):
            for fallback in (False, True):
                endpoint = llm.job(job, fallback=fallback)
                if endpoint is not None:
                    found.append(endpoint.api_key)
        return sorted({s for s in found if len(s) >= SECRET_MIN}, key=len, reverse=True)

    def hide(self, text: str) -> str:
        """`text` with every API key in play blanked out (an error message may quote one)."""
        for secret in self.secrets():
            text = text.replace(secret, "***")
        return text

    def key_moves_server(self) -> bool:
        """Whether a current API key would now go to another server than the one it is for:
        the address moved and no new key was given (the caller then clears it)."""
        if self.changed("api_key") or self.locked("api_key") or not self.current("api_key"):
            return False
        if self.value("provider") == "llamacpp":
            return False
        return origin(self.value("base_url")) != origin(self.current("base_url"))
