"""The one place providers are built from configuration: each job's model and its fallback.

Nothing else reads provider settings. `Models` holds the two jobs: `primary` (the person's
turns, scheduled prompts, goal steps) and `light` (episode encoding, compaction, the DMN, goal
plans). Jobs whose settings resolve to the same endpoint share one provider (one connection
pool, one loaded GGUF).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from chalie.config import JOBS, LlmConfig
from chalie.errors import LlmError
from chalie.llm.anthropic import AnthropicProvider
from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.llm.prompted import PromptedTools
from chalie.llm.route import Endpoint, Job
from chalie.llm.scripted import ScriptedProvider
from chalie.llm.types import LlmProvider
from chalie.metrics import Metrics
from chalie.prompts import Prompts

log = structlog.get_logger("chalie.llm")

CHECK_TIMEOUT_S = 5.0


def build_provider(settings: LlmConfig) -> LlmProvider:
    """One endpoint's provider, one attempt per request (retries are the Job's)."""
    match settings.provider:
        case "script":
            return ScriptedProvider.from_file(settings.script)
        case "anthropic":
            return AnthropicProvider(
                base_url=settings.base_url, model=settings.model, api_key=settings.api_key,
                max_tokens=settings.max_tokens, version=settings.anthropic_version,
                stream=settings.stream, stall_timeout_s=settings.stall_timeout_s)
        case "llamacpp":  # the optional extra: imported only when configured
            from chalie.llm.llamacpp import LlamaCppProvider  # noqa: PLC0415

            return LlamaCppProvider(model_path=settings.model,
                                    context_window=settings.context_window,
                                    max_tokens=settings.max_tokens, threads=settings.threads)
        case _:
            return OpenAICompatProvider(base_url=settings.base_url, model=settings.model,
                                        api_key=settings.api_key, stream=settings.stream,
                                        stall_timeout_s=settings.stall_timeout_s)


class Models:
    """The jobs' models: `primary` and `light`, each an LlmProvider."""

    def __init__(self, primary: Job, light: Job) -> None:
        self.primary = primary
        self.light = light

    @property
    def jobs(self) -> tuple[Job, ...]:
        return (self.primary, self.light)

    def describe(self) -> dict[str, Any]:
        """Each job's provider and its last state, for /health."""
        return {job.name: job.describe() for job in self.jobs}

    def check(self) -> None:
        """Ask every model's server for its model list, once, on a thread of its own, and say
        in the log what is unreachable and what to change: the server starts anyway."""
        threading.Thread(target=self._check, name="llm-check", daemon=True).start()

    def _check(self) -> None:
        shared: dict[int, list[Endpoint]] = {}
        for job in self.jobs:
            for endpoint in job.endpoints:
                shared.setdefault(id(endpoint.provider), []).append(endpoint)
        for endpoints in shared.values():  # one check and one line per provider
            first, *others = endpoints
            check_endpoint(first, jobs=",".join(e.job + (" fallback" if e.fallback else "")
                                                for e in endpoints))
            for other in others:
                other.status = first.status

    def replace(self, new: Models) -> list[Endpoint]:
        """Take `new`'s models for each job from its next call on (settings changed while
        running); returns the endpoints replaced, to close once no turn can use them."""
        replaced: list[Endpoint] = []
        for job, fresh in zip(self.jobs, new.jobs, strict=True):
            replaced += job.swap(fresh.endpoints)
        return replaced

    def rebuild(self, llm: LlmConfig, prompts: Prompts, metrics: Metrics | None, *,
                close_after_s: float) -> None:
        """Build every job's models from `llm` and answer with them from the next call on;
        the replaced providers are closed `close_after_s` later (no turn that began with them
        is still running by then), and the new ones are checked, as at start."""
        fresh = build_models(llm, prompts, metrics)
        replaced = self.replace(fresh)
        log.info("models_changed", **{job.name: job.describe()["model"] for job in self.jobs})
        kept = {id(e.provider) for job in self.jobs for e in job.endpoints}
        old = {id(e.provider): e.provider for e in replaced if id(e.provider) not in kept}

        def close() -> None:
            for provider in old.values():
                provider.close()

        timer = threading.Timer(close_after_s, close)
        timer.daemon = True
        timer.start()
        self.check()

    def close(self) -> None:
        closed: set[int] = set()
        for job in self.jobs:
            for endpoint in job.endpoints:
                if id(endpoint.provider) not in closed:
                    closed.add(id(endpoint.provider))
                    endpoint.provider.close()


def check_endpoint(endpoint: Endpoint, timeout_s: float = CHECK_TIMEOUT_S, *,
                   jobs: str | None = None) -> str | None:
    """Reachable, and serving its model? Marks the endpoint's state, logs one line (naming
    `jobs`, the jobs that share it), and returns what is wrong (None: nothing)."""
    where = {"job": jobs or endpoint.job, "provider": endpoint.kind, "model": endpoint.model,
             "address": endpoint.address}
    try:
        served = endpoint.provider.models(timeout_s=timeout_s)
    except LlmError as e:
        endpoint.failed(e)
        problem = endpoint.status.error or str(e)
        log.warning("llm_unavailable", problem=problem, **where)
        return problem
    if served and endpoint.kind in ("openai", "anthropic") and endpoint.model not in served \
            and f"{endpoint.model}:latest" not in served:
        shown = ", ".join(served[:8]) + (" ..." if len(served) > 8 else "")
        problem = (f"{endpoint.kind} at {endpoint.address} does not list model "
                   f"{endpoint.model!r} (it has: {shown}); set {endpoint.key('model')}")
        endpoint.mark("error", problem)
        log.warning("llm_model_missing", problem=problem, **where)
        return problem
    endpoint.mark("ok")
    log.info("llm_ready", **where)
    return None


def build_models(llm: LlmConfig, prompts: Prompts, metrics: Metrics | None = None, *,
                 build: Callable[[LlmConfig], LlmProvider] = build_provider) -> Models:
    """Both jobs from `llm`; endpoints with the same settings share their provider."""
    built: dict[LlmConfig, LlmProvider] = {}

    def endpoint(job: str, fallback: bool) -> Endpoint | None:
        settings = llm.job(job, fallback=fallback)
        if settings is None:
            return None
        if settings.provider == "script":  # a script is replayed exactly: never retried
            settings = _replace(settings, retries=0)
        provider = built.get(settings)
        if provider is None:
            provider = build(settings)
            if not settings.tools:
                provider = PromptedTools(provider, prompts)
            built[settings] = provider

        def key(name: str) -> str:
            return llm.key(job, name, fallback=fallback)

        return Endpoint(provider, settings, job, key, fallback=fallback)

    jobs = []
    for name in JOBS:
        main = endpoint(name, False)
        assert main is not None
        spare = endpoint(name, True)
        jobs.append(Job(name, [main] if spare is None else [main, spare], metrics))
    return Models(*jobs)


def single(provider: LlmProvider, llm: LlmConfig, metrics: Metrics | None = None) -> Models:
    """Both jobs on one given provider (tests, embedding Chalie): normalised, never retried."""
    settings = _replace(llm.job("primary") or llm, retries=0)
    jobs = [Job(name, [Endpoint(provider, settings, name, lambda k: f"llm.{k}")], metrics)
            for name in JOBS]
    return Models(*jobs)


def _replace(settings: LlmConfig, **changes: Any) -> LlmConfig:
    return msgspec.structs.replace(settings, **changes)
