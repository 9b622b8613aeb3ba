"""`chalie setup [--config FILE]`: choose the model in a terminal, as the browser's setup does.

For a server reached over ssh: the questions of the browser's setup card (the provider, from the
same presets; the address; the API key, never echoed; the model, picked from the list the server
offers when it gives one; the context window), then the live model checks `chalie doctor` runs
(reachable, model served, a tool call round trip, structured output), then the answers saved to
<store.path>/settings.toml (chalie/settings.py), merged into what is saved there.

By default the answers go to [llm], the model every job starts from; `--job primary|light`
writes that job's own table, `--fallback` its fallback's ([llm.primary.fallback] unless --job
light). A key the environment sets (CHALIE_LLM__MODEL...) is locked: the environment would win
over the saved value, so it is not asked, and a flag that would change it is refused.

Interactive (stdin a terminal): the questions, with the current values as defaults; the key is
read with getpass (Enter keeps the current one). Stdin that is not a terminal is refused: a
script passes `--non-interactive` and the flags (the key by `--api-key-env VAR` or
`--api-key-stdin`, never as an argument, which `ps` would show).

Exit codes: 0 saved (or nothing to change); 1 a check FAILed and nothing was saved (saved
anyway with --save-on-failure: then 0), also the save declined, the questions stopped, or the
file not writable; 2 bad flags, a configuration error, or a locked key.

It never opens the database, and writes nothing but settings.toml. A server running on the same
data directory reads the file again on `systemctl reload chalie` (SIGHUP).
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from chalie import settings
from chalie.cli_setup_ask import Stopped, Terminal, questions
from chalie.cli_setup_form import (
    PRESETS,
    PROVIDERS,
    Form,
    local_extra,
    preset_named,
    resolved,
    table_for,
)
from chalie.config import Config
from chalie.doctor_models import check_models
from chalie.errors import ConfigError, LlmError, PromptError, StoreError
from chalie.llm.factory import build_provider
from chalie.prompts import Prompts
from chalie.store.lock import holder

LIST_TIMEOUT_S = 10.0  # the most asking the server for its models may take
_LEVELS = {"ok": "ok    ", "warn": "warn  ", "FAIL": "FAIL  "}  # as `chalie doctor` prints
_VALUE_FLAGS = ("preset", "provider", "base_url", "api_key_env", "api_key_stdin", "model",
                "context_window", "save_on_failure")


class Refused(Exception):
    """Bad flags, or a change the environment would override: exit 2, nothing saved."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "setup", help="choose the model (the browser's setup questions, in a terminal)",
        description="Choose the model: provider, address, API key, model, context window; "
        "check it live as `chalie doctor` does; save it to <store.path>/settings.toml.",
        epilog="Exit codes: 0 saved; 1 a check FAILed (nothing saved unless "
        "--save-on-failure), or not saved; 2 bad flags, a config error or a locked key.")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="TOML file merged over config/chalie.toml (the server's own)")
    parser.add_argument("--non-interactive", action="store_true",
                        help="ask nothing: take the flags below (for scripts)")
    parser.add_argument("--job", choices=("primary", "light"),
                        help="set this job's own model instead of [llm], every job's")
    parser.add_argument("--fallback", action="store_true",
                        help="set the fallback of --job's job (the primary's by default)")
    parser.add_argument("--preset", choices=[p.name for p in PRESETS],
                        help="fills the provider and the address: " + ", ".join(
                            f"{p.name} ({p.base_url or p.label})" for p in PRESETS))
    parser.add_argument("--provider", choices=PROVIDERS, help="openai: any OpenAI-compatible "
                        "server; llamacpp: --model is a .gguf file's path")
    parser.add_argument("--base-url", metavar="URL", help="the address, up to /v1")
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--api-key-env", metavar="VAR",
                     help="read the API key from environment variable VAR (empty: no key). "
                     "There is no --api-key: a key given as an argument shows in `ps`")
    key.add_argument("--api-key-stdin", action="store_true",
                     help="read the API key as one line from stdin")
    key.add_argument("--api-key", help=argparse.SUPPRESS)  # refused, saying why
    parser.add_argument("--model", help="the model's name (llamacpp: the .gguf file's path)")
    parser.add_argument("--context-window", type=int, metavar="TOKENS",
                        help="the model's context window in tokens")
    parser.add_argument("--no-test", action="store_true", help="skip the live checks")
    parser.add_argument("--save-on-failure", action="store_true",
                        help="save even when a check FAILs (the model server is not up yet)")


def run(args: argparse.Namespace, *, env: Mapping[str, str], stdin: TextIO | None = None,
        out: TextIO | None = None) -> int:
    """Ask (or read the flags), check, save; the exit code. Never prints an API key."""
    stdin, out = stdin or sys.stdin, out or sys.stdout
    if args.api_key is not None:
        return _refuse("--api-key is not taken: a key on the command line shows in `ps` and "
                       "the shell's history; use --api-key-env VAR or --api-key-stdin")
    try:
        config, saved = settings.load(args.config, env)
    except ConfigError as e:
        return _refuse(f"{e}")
    problem = wrong_user(Path(config.store.path), os.geteuid())
    if problem is not None:
        return _refuse(problem)
    form = Form(table_for(args.job, args.fallback), args.config, config, saved, env)
    term = Terminal(stdin, out, form.hide)
    try:
        if args.non_interactive:
            _from_flags(form, args, stdin)
        else:
            _interactive_allowed(args, stdin)
            questions(form, term, _list_models)
        return _check_and_save(form, args, term)
    except Refused as e:
        return _refuse(str(e))
    except (Stopped, KeyboardInterrupt):
        print("\nchalie: setup stopped; nothing saved", file=sys.stderr)
        return 1


def _refuse(problem: str) -> int:
    print(f"chalie: {problem}", file=sys.stderr)
    return 2


def _interactive_allowed(args: argparse.Namespace, stdin: TextIO) -> None:
    given = [f"--{f.replace('_', '-')}" for f in _VALUE_FLAGS if getattr(args, f)
             not in (None, False)]
    if given:
        raise Refused(f"{', '.join(given)}: only with --non-interactive (the questions ask "
                      "for these)")
    if not stdin.isatty():
        raise Refused("stdin is not a terminal: a script passes --non-interactive and the "
                      "settings as flags (chalie setup --help)")


def _from_flags(form: Form, args: argparse.Namespace, stdin: TextIO) -> None:
    """The changes the flags name; Refused for flags that contradict each other."""
    if args.preset:
        preset = preset_named(args.preset)
        if args.provider and args.provider != preset.provider:
            raise Refused(f"--preset {preset.name} is provider {preset.provider}, not "
                          f"--provider {args.provider}")
        if not preset.base_url and preset.provider == "openai" and args.base_url is None:
            raise Refused(f"--preset {preset.name} needs --base-url")
        form.set("provider", preset.provider)
        if preset.base_url:
            form.set("base_url", preset.base_url)
    if args.provider:
        form.set("provider", args.provider)
    if args.base_url is not None:
        form.set("base_url", args.base_url)
    if args.api_key_env:
        if args.api_key_env not in form.env:
            raise Refused(f"--api-key-env {args.api_key_env}: the environment has no such "
                          "variable")
        form.set("api_key", form.env[args.api_key_env])
    if args.api_key_stdin:
        line = stdin.readline().rstrip("\r\n")
        if not line:
            raise Refused("--api-key-stdin: stdin gave no key")
        form.set("api_key", line)
    if args.model is not None:
        if not args.model.strip():
            raise Refused("--model: empty")
        form.set("model", args.model)
    if form.changed("provider") and form.value("provider") == "llamacpp" \
            and not form.changed("model") and form.current("provider") != "llamacpp":
        raise Refused("provider llamacpp needs --model: the .gguf file's path")
    if args.context_window is not None:
        if args.context_window <= 0:
            raise Refused("--context-window: must be a positive number of tokens")
        form.set("context_window", args.context_window)


def _check_and_save(form: Form, args: argparse.Namespace, term: Terminal) -> int:
    locked = form.locked_changes()
    if locked:
        raise Refused("; ".join(f"{key} is set by the environment ({var}): change it there, "
                                "or unset it" for key, var in locked))
    if form.value("provider") == "llamacpp" and not local_extra():
        raise Refused("provider llamacpp runs a GGUF in this process and needs the local "
                      "extra: pip install 'chalie[local]'")
    if form.key_moves_server():
        form.set("api_key", "")
        term.say(f"The API key was for {form.current('base_url')}: it is not sent to the new "
                 "address, and is cleared (give the new server's key, if it needs one)")
    try:
        candidate = form.candidate()
    except ConfigError as e:
        raise Refused(f"{e.key}: {e.problem}") from None
    failed = 0
    if not args.no_test:
        failed = _check(candidate, term)
    interactive = not args.non_interactive
    if interactive and not term.confirm(f"Save to {settings.path_for(form.config)}?",
                                        default=not failed):
        term.say("Nothing saved.")
        return 1
    if not interactive and failed and not args.save_on_failure:
        term.say("chalie: a check FAILed: nothing saved (--save-on-failure saves anyway)")
        return 1
    if not form.changes:
        term.say("chalie: nothing to change")
        return 0
    return _save(form, term)


def _check(candidate: Config, term: Terminal) -> int:
    """The doctor's model checks for the settings as they would be, printed as they come; the
    number of FAILs."""
    try:
        prompts = Prompts.load()
    except PromptError as e:
        raise Refused(f"{e}; restore the prompts/ directory") from None
    term.say("Checking the models (as `chalie doctor` does):")
    failed = 0
    for line in check_models(candidate.llm, prompts):
        text = line.what if not line.problem else f"{line.what}: {line.problem}"
        term.say(_LEVELS[line.level] + text)
        failed += line.level == "FAIL"
    return failed


def _save(form: Form, term: Terminal) -> int:
    path = settings.path_for(form.config)
    try:
        settings.write(path, form.merged())
    except OSError as e:
        print(f"chalie: cannot write {path}: {e}; nothing saved", file=sys.stderr)
        return 1
    term.say(f"chalie: saved {', '.join(sorted(form.changes))} to {path}")
    term.say(_who_uses_them(Path(form.config.store.path)))
    return 0


def _who_uses_them(directory: Path) -> str:
    """What makes the saved settings take effect: the running server's reload, or a start."""
    try:
        pid = holder(directory)
    except StoreError:
        pid = None
    if pid is None:
        return "chalie: `chalie serve` will use them"
    who = f"pid {pid}" if pid else "pid unknown"
    signal = f"`kill -HUP {pid}`" if pid else "SIGHUP"
    return (f"chalie: a server ({who}) runs on {directory}: `systemctl reload chalie` (or "
            f"{signal}) makes it read them; the dashboard's settings show what is in effect")


def wrong_user(directory: Path, euid: int) -> str | None:
    """Why saving into `directory` as user `euid` would leave settings the server cannot read
    (the directory is another user's: the service's), or None. Root may write anywhere, so for
    root a data directory not made yet counts as its nearest existing parent's owner's."""
    directory = directory.absolute()
    try:
        if directory.exists():
            owner = directory.stat().st_uid
        elif euid == 0:
            owner = next(p for p in directory.parents if p.exists()).stat().st_uid
        else:
            return None
    except OSError:
        return None
    if owner == euid:
        return None
    try:
        name = pwd.getpwuid(owner).pw_name
    except KeyError:
        name = f"#{owner}"
    return (f"{directory} belongs to {name}: run `sudo -u {name} chalie setup` (with the same "
            "--config), so that the server can read what is saved")


def _list_models(form: Form) -> tuple[list[str] | None, str]:
    """The models the server of the table as it would be offers, or None and why not."""
    try:
        candidate = form.candidate()
    except ConfigError as e:
        return None, f"{e.key}: {e.problem}"
    try:
        provider = build_provider(resolved(candidate.llm, form.table))
    except (ConfigError, LlmError) as e:
        return None, str(e)
    try:
        return sorted(provider.models(timeout_s=LIST_TIMEOUT_S)), ""
    except LlmError as e:
        return None, str(e)
    finally:
        provider.close()
