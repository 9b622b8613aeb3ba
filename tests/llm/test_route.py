"""A job's models: classed retries, Retry-After, the fallback, and errors that say what to change.

The providers here are fakes at the LlmProvider seam; the wire formats have their own tests, and
tests/integration/test_models.py runs the same behaviour against real loopback servers."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from chalie.config import LlmConfig
from chalie.config_load import load_config
from chalie.errors import LlmBadResponse, LlmError, LlmHttpError, LlmJobFailed, LlmUnavailable
from chalie.llm.factory import build_models, single
from chalie.llm.route import Endpoint, Job
from chalie.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    TextSink,
    ToolCall,
    ToolSpec,
    Usage,
)
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.values.images import Image

REQUEST = ChatRequest(system="s", messages=(Message("user", "hi"),))
Answer = ChatResponse | LlmError | Callable[[TextSink | None], ChatResponse]


def answer(text: str = "ok") -> ChatResponse:
    return ChatResponse(text, (), Usage(10, 2, 12), "stop", 0.01)


class Fake:
    """A provider answering from a list: a response, an error to raise, or a function of the
    text sink (to stream)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.timeouts: list[float] = []

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        self.calls += 1
        self.timeouts.append(timeout_s)
        a = self.answers.pop(0)
        if isinstance(a, LlmError):
            raise a
        if isinstance(a, ChatResponse):
            return a
        return a(on_text)

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        return ("m",)

    def close(self) -> None:
        pass


def settings(**over: Any) -> LlmConfig:
    base = load_config().llm.job("primary")
    assert base is not None
    return msgspec.structs.replace(base, **{"retries": 2, "retry_backoff_s": 0.5, **over})


def job(*providers: Fake, metrics: Metrics | None = None, sleeps: list[float] | None = None,
        **over: Any) -> Job:
    out = sleeps if sleeps is not None else []
    def key(fallback: bool) -> Callable[[str], str]:
        return lambda k: f"llm.primary{'.fallback' if fallback else ''}.{k}"

    endpoints = [Endpoint(p, settings(**over), "primary", key(n > 0), fallback=n > 0)
                 for n, p in enumerate(providers)]
    return Job("primary", endpoints, metrics, sleep=out.append, rng=random.Random(7))


def http(status: int, detail: str = "nope", retry_after: float | None = None) -> LlmHttpError:
    return LlmHttpError(status, detail, retry_after_s=retry_after, detail=detail)


def test_connection_errors_and_5xx_retry_with_growing_jittered_backoff() -> None:
    """Two transient failures, then an answer: two waits, each within [½, 1] of the doubling."""
    sleeps: list[float] = []
    provider = Fake(LlmUnavailable("connection refused"), http(503), answer("fine"))
    assert job(provider, sleeps=sleeps).complete(REQUEST, timeout_s=60).text == "fine"
    assert provider.calls == 3
    assert 0.25 <= sleeps[0] <= 0.5
    assert 0.5 <= sleeps[1] <= 1.0


def test_other_4xx_never_retry_and_the_error_names_the_setting() -> None:
    """A refused key is not retried; the message names the provider, address and api_key key."""
    provider = Fake(http(401, "invalid x-api-key"))
    with pytest.raises(LlmJobFailed) as caught:
        job(provider).complete(REQUEST, timeout_s=60)
    assert provider.calls == 1
    text = str(caught.value)
    assert "refused the API key" in text
    assert "http://127.0.0.1:11434/v1" in text
    assert "llm.primary.api_key" in text
    assert not caught.value.recoverable


@pytest.mark.parametrize(("error", "words"), [
    (http(404, 'model "x" not found, try pulling it first'), ["has no model", ".model"]),
    (http(400, "This model's maximum context length is 8192 tokens"),
     ["longer than", ".context_window"]),
    (LlmUnavailable("cannot connect (ConnectError: refused)"),
     ["unreachable", "is the model server running", ".base_url"]),
    (LlmUnavailable("timed out after 120.0s"), ["did not answer in time", ".request_timeout_s"]),
    (LlmBadResponse("not a chat completion"), ["cannot read", ".base_url", ".provider"]),
])
def test_each_failure_says_what_went_wrong_and_what_to_change(error: LlmError,
                                                             words: list[str]) -> None:
    """Unknown model, context too long, down, slow, speaking another API: each has advice."""
    with pytest.raises(LlmJobFailed) as caught:
        job(Fake(*([error] * 3)), retries=0).complete(REQUEST, timeout_s=60)
    for word in words:
        assert word in str(caught.value)


def test_a_429_waits_the_advertised_retry_after() -> None:
    """Retry-After: 3 within max_retry_after_s: the job waits exactly 3 s, then asks again."""
    sleeps: list[float] = []
    provider = Fake(http(429, "slow down", retry_after=3.0), answer("after the wait"))
    assert job(provider, sleeps=sleeps).complete(REQUEST, timeout_s=60).text == "after the wait"
    assert sleeps == [3.0]


def test_a_429_asking_more_than_the_cap_goes_to_the_fallback_at_once() -> None:
    """A wait above max_retry_after_s is not made: the fallback answers, with no sleep."""
    sleeps: list[float] = []
    primary, spare = Fake(http(429, "later", retry_after=600.0)), Fake(answer("spare"))
    metrics = Metrics()
    result = job(primary, spare, sleeps=sleeps, metrics=metrics).complete(REQUEST, timeout_s=60)
    assert result.text == "spare"
    assert sleeps == []
    assert metrics.llm_fallbacks.labels(job="primary")._value.get() == 1


def test_rate_limited_within_the_cap_the_fallback_is_not_asked() -> None:
    """A short 429 wait keeps the request on the primary; the fallback never sees it."""
    primary, spare = Fake(http(429, retry_after=1.0), answer("primary")), Fake(answer("spare"))
    assert job(primary, spare).complete(REQUEST, timeout_s=60).text == "primary"
    assert spare.calls == 0


def test_the_fallback_answers_while_the_primary_is_down() -> None:
    """The primary's retries run out; the fallback answers the same request."""
    primary = Fake(*([LlmUnavailable("connection refused")] * 3))
    spare = Fake(answer("from the fallback"))
    assert job(primary, spare).complete(REQUEST, timeout_s=60).text == "from the fallback"
    assert primary.calls == 3
    assert spare.calls == 1


def test_when_both_fail_the_error_names_both() -> None:
    """Both down: one error saying what each model did."""
    primary = Fake(http(401, "bad key"))
    spare = Fake(http(404, "no such model"))
    with pytest.raises(LlmJobFailed) as caught:
        job(primary, spare).complete(REQUEST, timeout_s=60)
    text = str(caught.value)
    assert "llm.primary.api_key" in text
    assert "the fallback failed too" in text
    assert "llm.primary.fallback.model" in text


def test_text_already_streamed_is_never_retried_or_replaced() -> None:
    """The stream broke off after text went out: no retry, no fallback, an error."""
    def half(on_text: TextSink | None) -> ChatResponse:
        assert on_text is not None
        on_text("Hello, ")
        raise LlmUnavailable("the stream broke off")

    primary, spare = Fake(half, answer()), Fake(answer("spare"))
    pieces: list[str] = []
    with pytest.raises(LlmJobFailed):
        job(primary, spare).complete(REQUEST, timeout_s=60, on_text=pieces.append)
    assert pieces == ["Hello, "]
    assert primary.calls == 1
    assert spare.calls == 0


def test_every_attempt_is_counted_by_provider_model_and_outcome() -> None:
    """chalie_llm_attempts_total: one failed and one answered attempt."""
    metrics = Metrics()
    job(Fake(http(502), answer()), metrics=metrics).complete(REQUEST, timeout_s=60)
    counted = metrics.llm_attempts
    assert counted.labels(provider="openai", model="llama3.1",
                          outcome="server_error")._value.get() == 1
    assert counted.labels(provider="openai", model="llama3.1", outcome="ok")._value.get() == 1


def test_the_job_reports_each_models_last_state() -> None:
    """describe(): the primary unreachable, the fallback ok, after one request."""
    j = job(Fake(*([LlmUnavailable("connection refused")] * 3)), Fake(answer()))
    j.complete(REQUEST, timeout_s=60)
    state = j.describe()
    assert state["state"] == "unreachable"
    assert "llm.primary.base_url" in state["error"]
    assert state["fallback"]["state"] == "ok"


def test_images_for_a_model_without_vision_get_a_clear_error() -> None:
    """vision = false: no request is sent; the error names the setting."""
    provider = Fake(answer())
    request = ChatRequest(system="", messages=(
        Message("user", "what is this?", images=(Image("image/png", b"\x89PNG"),)),))
    with pytest.raises(LlmJobFailed) as caught:
        job(provider, vision=False).complete(request, timeout_s=60)
    assert "llm.primary.vision" in str(caught.value)
    assert provider.calls == 0


def test_a_fallback_with_vision_takes_images_the_primary_cannot() -> None:
    """Images skip a model configured without vision and go to one with it."""
    primary, spare = Fake(answer("blind")), Fake(answer("I see a cat"))
    endpoints = [Endpoint(primary, settings(vision=False), "primary", lambda k: k),
                 Endpoint(spare, settings(), "primary", lambda k: k, fallback=True)]
    request = ChatRequest(system="", messages=(
        Message("user", "?", images=(Image("image/png", b"x"),)),))
    assert Job("primary", endpoints).complete(request, timeout_s=5).text == "I see a cat"
    assert primary.calls == 0


def test_broken_tool_call_json_is_repaired_on_the_way_out() -> None:
    """Every answer is normalised: trailing commas and single quotes become a usable call."""
    broken = ToolCall("c1", "memory", None, "{'action': 'remember',}", "not JSON")
    provider = Fake(ChatResponse("", (broken,), Usage(1, 1, 2), "tool_calls", 0.0))
    request = ChatRequest(system="", messages=(Message("user", "x"),),
                          tools=(ToolSpec("memory", "m", {"type": "object"}),))
    call = job(provider).complete(request, timeout_s=5).tool_calls[0]
    assert call.args == {"action": "remember"}
    assert call.args_error is None


def test_no_time_left_means_no_retry() -> None:
    """A wait that would pass the request's deadline is not made."""
    sleeps: list[float] = []
    provider = Fake(http(429, retry_after=20.0), answer())
    with pytest.raises(LlmJobFailed):
        job(provider, sleeps=sleeps).complete(REQUEST, timeout_s=5)
    assert sleeps == []


# --- building the jobs from configuration ---------------------------------------------------

def test_jobs_without_sections_of_their_own_share_one_provider() -> None:
    """[llm] alone: primary and light are the same endpoint, built once."""
    built: list[LlmConfig] = []

    def build(s: LlmConfig) -> Fake:
        built.append(s)
        return Fake()

    models = build_models(load_config().llm, _prompts(), build=build)
    assert len(built) == 1
    assert models.primary.endpoints[0].provider is models.light.endpoints[0].provider


def test_a_job_section_overrides_only_what_it_names(tmp_path: Any) -> None:
    """[llm.light] model = small: light has its own model and everything else of [llm]."""
    path = tmp_path / "c.toml"
    path.write_text('[llm]\nmodel = "big"\napi_key = "k"\n[llm.light]\nmodel = "small"\n'
                    '[llm.primary.fallback]\nprovider = "anthropic"\n'
                    'base_url = "https://api.anthropic.com/v1"\nmodel = "claude"\n')
    llm = load_config(path).llm
    models = build_models(llm, _prompts(), build=lambda s: Fake())
    light = models.light.endpoints[0].settings
    assert (light.model, light.api_key, light.base_url) == ("small", "k", llm.base_url)
    assert [e.settings.provider for e in models.primary.endpoints] == ["openai", "anthropic"]
    assert models.primary.endpoints[1].settings.api_key == "k"
    assert models.primary.endpoints[1].key("model") == "llm.primary.fallback.model"
    assert models.primary.endpoints[1].key("api_key") == "llm.api_key"


def test_a_given_provider_serves_both_jobs_untried_again() -> None:
    """single(): tests and embedders hand one provider; a failure is not retried."""
    provider = Fake(LlmUnavailable("down"), answer())
    models = single(provider, load_config().llm)
    with pytest.raises(LlmJobFailed):
        models.light.complete(REQUEST, timeout_s=5)
    assert provider.calls == 1


def _prompts() -> Prompts:
    return Prompts.load()
