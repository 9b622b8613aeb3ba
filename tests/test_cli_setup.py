"""`chalie setup` run as a person (or a script) runs it: a subprocess against a stub model on
127.0.0.1, read by its printed lines, its exit code and the settings.toml it leaves. The
interactive questions are answered through a pseudo-terminal, as over ssh."""

from __future__ import annotations

import os
import pty
import pwd
import select
import socket
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from chalie import settings
from chalie.cli_setup import wrong_user
from chalie.cli_setup_form import offered
from chalie.store.lock import DataLock
from tests.conftest import write_config
from tests.integration.harness import ROOT, WAIT_S, StubLlm, completion

SECRET = "sk-setup-secret-0123456789"


@pytest.fixture
def stub() -> Iterator[StubLlm]:
    llm = StubLlm()
    yield llm
    llm.close()


def closed_url() -> str:
    """An OpenAI-style base URL on a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def config_file(tmp_path: Path, **llm: object) -> Path:
    sections: dict[str, dict[str, object]] = {"store": {"path": str(tmp_path / "data")},
                                              "memory": {"embedder": "hashed"}}
    if llm:
        sections["llm"] = dict(llm)
    return write_config(tmp_path, sections)


def saved_file(tmp_path: Path) -> Path:
    return tmp_path / "data" / settings.FILE_NAME


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    env.update(extra)
    return env


def setup(config: Path, *flags: str, env: dict[str, str] | None = None,
          stdin: str = "") -> tuple[int, list[str], str]:
    """Run `python -m chalie setup --config FILE FLAGS`: (exit code, stdout lines, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "chalie", "setup", "--config", str(config), *flags],
        cwd=ROOT, env=env or clean_env(), input=stdin, capture_output=True, text=True,
        timeout=WAIT_S * 3, check=False)
    return done.returncode, done.stdout.splitlines(), done.stderr


def queue_tool_round_trip(stub: StubLlm) -> None:
    """What a model that can use tools answers the tool probe: a call of echo, then text."""
    stub.queue(completion(tool_calls=[("echo", '{"text": "marmalade"}')]),
               completion("You said marmalade."))


def test_non_interactive_against_the_stub_saves_the_model_and_serve_uses_it(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """The flags' settings are checked live (the doctor's lines printed), saved to
    settings.toml (0600) with the key from --api-key-env, and what `chalie serve` loads."""
    queue_tool_round_trip(stub)
    config = config_file(tmp_path)
    code, lines, stderr = setup(
        config, "--non-interactive", "--provider", "openai", "--base-url", stub.base_url,
        "--model", "stub-model", "--context-window", "16384", "--api-key-env", "STUB_KEY",
        env=clean_env(STUB_KEY=SECRET))
    assert code == 0, "\n".join(lines) + stderr
    assert (f"ok    primary model: openai stub-model at {stub.base_url} "
            "(reachable, tool call, structured output)") in lines
    assert any(x.startswith("ok    light model: openai stub-model") for x in lines)
    assert lines[-1] == "chalie: `chalie serve` will use them"
    file = saved_file(tmp_path)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert tomllib.loads(file.read_text()) == {"llm": {
        "provider": "openai", "base_url": stub.base_url, "api_key": SECRET,
        "model": "stub-model", "context_window": 16384}}
    assert SECRET not in "\n".join(lines) + stderr
    loaded, _ = settings.load(config, {})
    assert (loaded.llm.model, loaded.llm.api_key, loaded.llm.context_window) == (
        "stub-model", SECRET, 16384)


def test_a_model_server_that_is_not_there_fails_and_nothing_is_saved(tmp_path: Path) -> None:
    """Against a closed port the primary model FAILs, the exit code is 1, and no file is
    written."""
    url = closed_url()
    code, lines, _ = setup(config_file(tmp_path), "--non-interactive", "--base-url", url)
    assert code == 1
    fail = [x for x in lines if x.startswith("FAIL  primary model:")]
    assert len(fail) == 1, "\n".join(lines)
    assert "unreachable" in fail[0]
    assert lines[-1] == "chalie: a check FAILed: nothing saved (--save-on-failure saves anyway)"
    assert not saved_file(tmp_path).exists()


def test_save_on_failure_saves_what_the_checks_could_not_reach(tmp_path: Path) -> None:
    """--save-on-failure saves even though the check FAILed (a model server not up yet)."""
    url = closed_url()
    code, lines, _ = setup(config_file(tmp_path), "--non-interactive", "--base-url", url,
                           "--model", "later", "--save-on-failure")
    assert code == 0
    assert any(x.startswith("FAIL  primary model:") for x in lines)
    assert settings.read(saved_file(tmp_path)) == {"llm": {"base_url": url, "model": "later"}}


def test_a_key_the_environment_sets_is_refused_naming_the_variable(tmp_path: Path) -> None:
    """--model while CHALIE_LLM__MODEL is set exits 2 naming the variable; nothing saved."""
    code, lines, stderr = setup(config_file(tmp_path), "--non-interactive", "--model", "x",
                                "--no-test", env=clean_env(CHALIE_LLM__MODEL="env-model"))
    assert code == 2
    assert "llm.model is set by the environment (CHALIE_LLM__MODEL)" in stderr
    assert lines == []
    assert not saved_file(tmp_path).exists()


def test_a_jobs_fallback_is_merged_into_what_is_saved(tmp_path: Path) -> None:
    """--job light --fallback writes [llm.light.fallback] and keeps the other saved keys; the
    key read from stdin is saved and never printed."""
    settings.write(saved_file(tmp_path), {"dmn": {"daily_cap": 3}, "llm": {"model": "big"}})
    code, lines, stderr = setup(
        config_file(tmp_path), "--non-interactive", "--job", "light", "--fallback",
        "--preset", "openrouter", "--model", "small", "--api-key-stdin", "--no-test",
        stdin=SECRET + "\n")
    assert code == 0, stderr
    assert settings.read(saved_file(tmp_path)) == {
        "dmn": {"daily_cap": 3},
        "llm": {"model": "big", "light": {"fallback": {
            "provider": "openai", "base_url": "https://openrouter.ai/api/v1",
            "api_key": SECRET, "model": "small"}}}}
    assert SECRET not in "\n".join(lines) + stderr
    assert not any(x.startswith(("ok ", "warn ", "FAIL ")) for x in lines)  # --no-test


def test_an_api_key_is_not_carried_to_another_server(tmp_path: Path) -> None:
    """Moving the address to another server without a new key clears the saved key rather
    than send it there."""
    settings.write(saved_file(tmp_path), {"llm": {"base_url": "https://api.openai.com/v1",
                                                  "api_key": SECRET}})
    code, lines, _ = setup(config_file(tmp_path), "--non-interactive", "--preset", "ollama",
                           "--no-test")
    assert code == 0
    assert any("is not sent to the new address, and is cleared" in x for x in lines)
    assert settings.read(saved_file(tmp_path)) == {"llm": {
        "provider": "openai", "base_url": "http://127.0.0.1:11434/v1", "api_key": ""}}


def test_a_running_server_is_told_to_reload(tmp_path: Path) -> None:
    """With a server holding the data directory's lock, the saved settings come with how to
    make it read them: systemctl reload or SIGHUP to its pid."""
    with DataLock(tmp_path / "data"):
        code, lines, _ = setup(config_file(tmp_path), "--non-interactive", "--model", "m",
                               "--no-test")
    assert code == 0
    assert f"a server (pid {os.getpid()})" in lines[-1]
    assert "`systemctl reload chalie`" in lines[-1]
    assert f"`kill -HUP {os.getpid()}`" in lines[-1]


def test_bad_flags_exit_2_and_the_key_is_never_an_argument(tmp_path: Path) -> None:
    """Value flags without --non-interactive, stdin that is not a terminal, a missing
    --api-key-env variable: exit 2, nothing saved; and --help says why there is no --api-key."""
    config = config_file(tmp_path)
    code, _, stderr = setup(config, "--model", "m")
    assert (code, "--model: only with --non-interactive" in stderr) == (2, True)
    code, _, stderr = setup(config)
    assert (code, "stdin is not a terminal" in stderr) == (2, True)
    code, _, stderr = setup(config, "--non-interactive", "--api-key-env", "NOT_SET_HERE")
    assert (code, "the environment has no such variable" in stderr) == (2, True)
    code, lines, stderr = setup(config, "--non-interactive", "--api-key", SECRET)
    assert (code, "--api-key is not taken" in stderr) == (2, True)
    assert SECRET not in "\n".join(lines) + stderr
    assert not saved_file(tmp_path).exists()
    code, lines, _ = setup(config, "--help")
    assert code == 0
    assert "shows in `ps`" in " ".join(" ".join(lines).split())


class Terminal:
    """A subprocess on a pseudo-terminal (its own session, as an ssh login has): read until a
    text appears, type a line."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
                                     env=env, start_new_session=True)
        os.close(slave)
        self._fd = master
        self.seen = ""
        self._read_to = 0

    def expect(self, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while (at := self.seen.find(text, self._read_to)) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                pytest.fail(f"no {text!r} in:\n{self.seen}")
        self._read_to = at + len(text)

    def type(self, line: str) -> None:
        os.write(self._fd, (line + "\n").encode())

    def finish(self) -> int:
        """Read the rest of the output; the exit code."""
        deadline = time.monotonic() + WAIT_S
        while self._read(max(deadline - time.monotonic(), 0.0)):
            pass
        return self.proc.wait(WAIT_S)

    def close(self) -> None:
        if self.proc.poll() is None:  # a test that failed half-way: it waits for an answer
            self.proc.kill()
            self.proc.wait(WAIT_S)
        os.close(self._fd)

    def _read(self, timeout_s: float) -> bool:
        """Read what is there (waiting up to timeout_s); False at the end of output."""
        ready, _, _ = select.select([self._fd], [], [], timeout_s)
        if not ready:
            return False
        try:
            data = os.read(self._fd, 4096)
        except OSError:  # EIO: the child closed its side
            return False
        self.seen += data.decode(errors="replace")
        return bool(data)


def test_interactive_questions_over_a_terminal_save_the_answers(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """The questions show the presets and the server's models by number, read the key without
    echoing it, run the checks, and save on Enter."""
    queue_tool_round_trip(stub)
    config = config_file(tmp_path, base_url=closed_url())
    term = Terminal([sys.executable, "-m", "chalie", "setup", "--config", str(config)],
                    clean_env())
    try:
        term.expect(" 1) Ollama  http://127.0.0.1:11434/v1")
        term.expect("Another OpenAI-compatible server")
        term.expect("Choose [")  # the default: the current address matches no preset
        term.type("custom")
        term.expect("Address (base URL, up to /v1) [http://127.0.0.1:")
        term.type(stub.base_url)
        term.expect("API key (not shown; Enter for none): ")
        term.type(SECRET)
        term.expect(" 1) llama3.1")
        term.expect(" 2) stub-model")
        term.expect("Model (a number or a name) [llama3.1]: ")
        term.type("2")
        term.expect("Context window (tokens) [8192]: ")
        term.type("")
        term.expect(f"ok    primary model: openai stub-model at {stub.base_url}")
        term.expect("[Y/n]: ")
        term.type("")
        term.expect("chalie: `chalie serve` will use them")
        assert term.finish() == 0, term.seen
    finally:
        term.close()
    assert SECRET not in term.seen
    assert settings.read(saved_file(tmp_path)) == {"llm": {
        "provider": "openai", "base_url": stub.base_url, "api_key": SECRET,
        "model": "stub-model", "context_window": 8192}}


def test_another_users_data_directory_is_refused_naming_the_owner(tmp_path: Path) -> None:
    """Saving into the service user's data directory as someone else (root included) would
    leave a file the server cannot read: refused, naming `sudo -u OWNER`."""
    me = os.geteuid()
    owner = pwd.getpwuid(me).pw_name
    assert wrong_user(tmp_path, me) is None
    assert f"run `sudo -u {owner} chalie setup`" in (wrong_user(tmp_path, me + 1) or "")
    not_made = tmp_path / "data" / "store"
    assert wrong_user(not_made, me + 1) is None  # it will be made as the user who saves
    if me != 0:  # root writing where it has not made the directory yet: the parent's owner's
        assert f"sudo -u {owner}" in (wrong_user(not_made, 0) or "")


def test_interactive_keys_the_environment_sets_are_not_asked_and_no_saves_nothing(
    tmp_path: Path, stub: StubLlm,
) -> None:
    """With CHALIE_LLM__MODEL set the model question says it is locked and is skipped; the
    checks use the environment's model; answering n to saving leaves no file and exits 1."""
    queue_tool_round_trip(stub)
    config = config_file(tmp_path, base_url=stub.base_url)
    term = Terminal([sys.executable, "-m", "chalie", "setup", "--config", str(config)],
                    clean_env(CHALIE_LLM__MODEL="stub-model"))
    try:
        term.expect(f"Choose [{len(offered())}]: ")  # the last: another OpenAI server
        term.type("")
        term.expect(f"[{stub.base_url}]: ")
        term.type("")
        term.expect("API key (not shown; Enter for none): ")
        term.type("")
        term.expect("llm.model is set by the environment (CHALIE_LLM__MODEL): kept, not asked")
        term.expect("Context window (tokens) [8192]: ")
        term.type("")
        term.expect(f"ok    primary model: openai stub-model at {stub.base_url}")
        term.expect("[Y/n]: ")
        term.type("n")
        term.expect("Nothing saved.")
        assert term.finish() == 1, term.seen
    finally:
        term.close()
    assert "Model (" not in term.seen
    assert not saved_file(tmp_path).exists()
