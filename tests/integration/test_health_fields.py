"""The /health fields the pages read to say what is wrong (issue 24's banner): each job's
model, the store, the embedder standing in for the configured one. They are the person's: the
pages send the login cookie; anyone else learns only whether the server is up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from chalie import __version__
from tests.integration.harness import ServerProcess, StubLlm


def details(server: ServerProcess) -> dict[str, Any]:
    """/health as the person's pages read it, with the login cookie."""
    r = httpx.get(f"{server.url}/health", cookies={"chalie_session": server.login()})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_health_tells_a_stranger_only_whether_the_server_is_up(
    server: ServerProcess, llm: StubLlm,
) -> None:
    """Without the cookie /health says the status and the version; the model's address and
    the data directory are the person's to read."""
    r = httpx.get(f"{server.url}/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": __version__}
    person = details(server)
    assert person["llm"]["primary"]["address"] == llm.base_url
    assert {"name", "jobs", "store", "embedder"} <= person.keys()


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
        body = details(server)
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
    embedder = details(server)["embedder"]
    assert (embedder["kind"], embedder["fell_back"], embedder["reason"]) == ("hashed", False, None)
