"""The /health fields the pages read to say what is wrong (issue 24's banner): each job's
model, the store, the embedder standing in for the configured one."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.integration.harness import ServerProcess, StubLlm


def test_health_says_when_the_embedder_stands_in_for_the_configured_one(
    tmp_path: Path, llm: StubLlm
) -> None:
    broken = tmp_path / "mine" / "encoder.onnx"  # not a model: it cannot be loaded
    broken.parent.mkdir()
    broken.write_bytes(b"not an onnx graph")
    (broken.parent / "tokenizer.json").write_text("{}")
    server = ServerProcess(tmp_path, llm, memory={
        "embedder": "minilm", "embed_model_path": str(broken)}).start()
    try:
        body = httpx.get(f"{server.url}/health").json()
        embedder = body["embedder"]
        assert (embedder["kind"], embedder["wanted"], embedder["fell_back"]) == (
            "hashed", "minilm", True)
        assert str(broken) in embedder["reason"]
        assert body["store"]["state"] == "ok"
        assert body["llm"]["primary"]["address"] == llm.base_url
        assert body["status"] == "ok"  # a stand-in embedder is no outage
    finally:
        server.stop()


def test_health_says_nothing_stands_in_when_the_embedder_is_the_configured_one(
    server: ServerProcess,
) -> None:
    embedder = httpx.get(f"{server.url}/health").json()["embedder"]
    assert (embedder["kind"], embedder["fell_back"], embedder["reason"]) == ("hashed", False, None)
