"""Build the configured provider."""

from __future__ import annotations

from chalie.config import LlmConfig
from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.llm.scripted import ScriptedProvider
from chalie.llm.types import LlmProvider


def build_provider(config: LlmConfig) -> LlmProvider:
    if config.provider == "script":
        return ScriptedProvider.from_file(config.script)
    return OpenAICompatProvider(
        base_url=config.base_url,
        model=config.model,
        api_key=config.api_key,
        retries=config.retries,
        retry_backoff_s=config.retry_backoff_s,
    )
