"""The real server with memory.embedder = "minilm" (a tiny BERT given in
memory.embed_model_path): the first start builds the ONNX file once and says so, the messages
are embedded by it in its own space, and a second start reuses the file."""

from __future__ import annotations

from pathlib import Path

from tests.integration.harness import ServerProcess, StubLlm, db_rows, wait_for
from tests.memory import tiny_bert


def test_the_server_embeds_with_minilm_and_builds_its_model_once(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """Start, chat, stop, start again: one "building the ONNX model (once)" log line in all,
    the messages' vectors are "minilm" ones of the model's dimension in space local:tiny
    (float32, as named here; the default int8 is tested in tests/memory)."""
    source = tiny_bert.write_model(tmp_path / "tiny")
    memory = {"embedder": "minilm", "embed_model_path": str(source), "embed_weights_url": "",
              "embed_precision": "float32", "index_delay_s": 0.0}
    server = ServerProcess(tmp_path, llm, memory=memory).start()
    try:
        started = [e for e in server.log_events() if e.get("event") == "memory"]
        assert (started[0]["embedder"], started[0]["space"]) == ("minilm", "local:tiny")
        built = [e for e in server.log_events() if e.get("event") == "embed_model_building"]
        assert built[0]["note"] == "building the ONNX model (once)..."
        client = server.connect(server.login())
        client.turn("the cat sat on the mat")
        query = ("SELECT v.embedder, v.dim, s.name FROM vectors v "
                 "JOIN vector_spaces s ON s.id = v.space_id")
        wait_for(lambda: len(db_rows(server.db_path, query)) >= 2)  # the message and the answer
        assert set(db_rows(server.db_path, query)) == {("minilm", tiny_bert.HIDDEN, "local:tiny")}
        assert not server.errors()
    finally:
        server.stop()
    again = ServerProcess(tmp_path, llm, memory=memory).start()
    try:
        assert not [e for e in again.log_events() if e.get("event") == "embed_model_building"]
        assert not again.errors()
    finally:
        again.stop()
    assert (tmp_path / "data" / "models" / "tiny.onnx").is_file()
