"""Adaptive traits from outside: a real server, the stub LLM and a person's socket. What the
person says about Chalie's answers shapes the next prompt's identity section and shows in
GET /api/state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for


@pytest.fixture
def server(tmp_path: Path, llm: StubLlm) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path, llm).start()
    yield proc
    proc.kill()
    assert not proc.errors(), proc.errors()


def traits_of(server: ServerProcess, cookie: str) -> dict[str, Any]:
    r = httpx.get(f"{server.url}/api/state", cookies={"chalie_session": cookie})
    assert r.status_code == 200, r.text
    return {t["name"]: t for t in r.json()["traits"]}


def test_asking_for_shorter_answers_shapes_the_next_prompt(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """After "please keep it shorter", the next prompt says the person prefers short answers,
    and GET /api/state shows the evidence; before it, nothing says so."""
    ws = server.connect(cookie)
    llm.queue(completion(" ".join(["The history of Lisbon is long and varied."] * 30)))
    ws.turn("Tell me about the history of Lisbon")
    assert "Prefers short answers." not in llm.requests[-1]["messages"][-1]["content"]
    llm.queue(completion("Lisbon: old, rebuilt after 1755."))
    ws.turn("Please keep it shorter")
    wait_for(lambda: "answer_length" in traits_of(server, cookie))
    llm.queue(completion("Porto: port wine, the Douro."))
    ws.turn("And Porto?")
    prompt = "\n\n".join(m["content"] for m in llm.requests[-1]["messages"])
    assert "Prefers short answers." in prompt
    # "And Porto?" leaned on a short answer: weak evidence for more, well under the request.
    length = traits_of(server, cookie)["answer_length"]["value"]
    assert 0.9 < length["short"] <= 1.0
    assert length.get("medium", 0.0) < 0.3
