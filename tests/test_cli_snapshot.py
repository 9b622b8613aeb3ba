"""`chalie snapshot TURN_ID`: the prompts a turn sent, read from the database file as a person
at a terminal sees them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chalie.act.snapshots import snapshot
from chalie.cli import main
from chalie.llm.types import ChatRequest, JsonSchemaFormat, Message, ToolSpec
from chalie.store import db, memory_writes
from tests.conftest import write_config

AT = 1_795_428_902.0  # 2026-11-23 10:15:02 UTC


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A config whose store holds two calls of turn "turn-1" (the second with a schema)."""
    path = write_config(tmp_path, {"store": {"path": str(tmp_path / "data")}})
    act = ChatRequest(
        system="You are Chalie.\nBe brief.",
        messages=(Message("user", "What is my dog called?"),),
        tools=(ToolSpec("memory", "Remember or recall facts.\nLonger explanation.",
                        {"type": "object"}),
               ToolSpec("recall", "Search memory.", {"type": "object"})),
    )
    encode = ChatRequest(
        system="Write episodes.",
        messages=(Message("user", "the window"), Message("assistant", "a first try")),
        response_format=JsonSchemaFormat(
            "episodes", {"type": "object", "required": ["gist"],
                         "properties": {"gist": {"type": "string"}}}),
    )
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            memory_writes.insert_snapshots(conn, "turn-1", [
                snapshot(act, call=1, purpose="act", now=AT),
                snapshot(encode, call=2, purpose="episode_encoding", now=AT + 61),
            ])
    finally:
        conn.close()
    return path


def test_snapshot_prints_each_call_of_the_turn_readably(
    config_file: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Each call gets a header with its purpose and UTC time, then the system prompt, every
    message under its role, the tools' first lines and the response schema as indented JSON."""
    assert main(["snapshot", "turn-1", "--config", str(config_file)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == """\
== call 1: act, 2026-11-23 10:15:02 UTC ==
--- system ---
You are Chalie.
Be brief.
--- user ---
What is my dog called?
--- tools ---
memory: Remember or recall facts.
recall: Search memory.

== call 2: episode_encoding, 2026-11-23 10:16:03 UTC ==
--- system ---
Write episodes.
--- user ---
the window
--- assistant ---
a first try
--- tools ---
(none)
--- response format: episodes ---
{
  "type": "object",
  "required": [
    "gist"
  ],
  "properties": {
    "gist": {
      "type": "string"
    }
  }
}
"""


def test_snapshot_json_prints_the_document_the_rest_endpoint_returns(
    config_file: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """--json prints one JSON document: the turn id and its calls, with tools and schema."""
    assert main(["snapshot", "turn-1", "--config", str(config_file), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    document = json.loads(out)
    assert document["turn_id"] == "turn-1"
    assert [(p["call"], p["purpose"], p["created_at"]) for p in document["prompts"]] == [
        (1, "act", AT), (2, "episode_encoding", AT + 61)]
    first, second = document["prompts"]
    assert first["messages"] == [{"role": "user", "content": "What is my dog called?"}]
    assert first["tools"][1] == {"name": "recall", "description": "Search memory.",
                                 "parameters": {"type": "object"}}
    assert first["response_format"] is None
    assert second["response_format"]["name"] == "episodes"
    assert second["tools"] == []


def test_snapshot_of_an_unknown_turn_says_so_and_exits_1(
    config_file: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A turn with no stored prompts prints nothing on stdout and says on stderr how many
    turns are kept."""
    assert main(["snapshot", "turn-9", "--config", str(config_file)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "'turn-9'" in err
    assert "kept for the last 50 turns" in err


def test_snapshot_without_a_database_names_the_path_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Pointed at a store that was never created, it names the missing file and creates
    nothing."""
    config = write_config(tmp_path, {"store": {"path": str(tmp_path / "nowhere")}})
    assert main(["snapshot", "turn-1", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert str(tmp_path / "nowhere" / "chalie.db") in err
    assert not (tmp_path / "nowhere").exists()


def test_snapshot_with_a_bad_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """An unknown config key stops it like `serve`: one line naming the key, exit code 2."""
    config = write_config(tmp_path, {"store": {"paht": "x"}})
    assert main(["snapshot", "turn-1", "--config", str(config)]) == 2
    assert "paht" in capsys.readouterr().err


def test_the_command_line_does_not_load_the_mcp_sdk_until_it_is_needed() -> None:
    """`chalie serve` without MCP servers never imports the MCP SDK (35 MiB resident): neither
    the command line nor doctor's module pulls it in at import."""
    code = ("import sys, chalie.cli, chalie.server; "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
