"""`chalie setup`'s questions in a terminal, in the order the browser's setup card asks them.

Each question shows its default (the value in effect now) in brackets: Enter takes it. The
provider is chosen from the presets by number or name; the model from the server's list by
number or name, or typed when the server gives no list. The API key is read with getpass, never
echoed: Enter keeps the current key (or, when the address moved to another server, leaves none),
a lone "-" removes it. A key the environment locks is not asked: the question says so.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from typing import TextIO

from chalie.cli_setup_form import GGUF, Form, Preset, offered, preset_for

ListModels = Callable[[Form], tuple[list[str] | None, str]]
SHOWN_MODELS = 60  # a longer list (OpenRouter's hundreds) is cut: its other names still work
REMOVE = "-"  # typed for the API key: remove the current one


class Stopped(Exception):
    """The person ended the questions (end of input, Ctrl-C): nothing is saved."""


class Terminal:
    """Lines out, answers in; every line passes through `hide` (no API key is ever shown)."""

    def __init__(self, stdin: TextIO, out: TextIO, hide: Callable[[str], str]) -> None:
        self._in = stdin
        self._out = out
        self._hide = hide

    def say(self, text: str) -> None:
        self._out.write(self._hide(text) + "\n")
        self._out.flush()

    def ask(self, question: str, default: str = "") -> str:
        """One answer, stripped; the default when it is empty."""
        shown = f" [{default}]" if default else ""
        self._out.write(self._hide(f"{question}{shown}: "))
        self._out.flush()
        try:
            line = self._in.readline()
        except KeyboardInterrupt:
            raise Stopped from None
        if not line:
            raise Stopped
        return line.strip() or default

    def secret(self, question: str) -> str:
        try:
            return getpass.getpass(f"{question}: ").strip()
        except (EOFError, KeyboardInterrupt):
            raise Stopped from None

    def confirm(self, question: str, *, default: bool) -> bool:
        while True:
            answer = self.ask(f"{question} {'[Y/n]' if default else '[y/N]'}").lower()
            if not answer:
                return default
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            self.say("Answer y or n.")


def questions(form: Form, term: Terminal, list_models: ListModels) -> None:
    """Fill `form` from the answers."""
    term.say(f"Chalie setup: the model of [{form.table}]. Enter keeps the value in brackets.")
    _provider(form, term)
    if form.value("provider") == "llamacpp":
        _gguf(form, term)
    else:
        _api_key(form, term)
        _model(form, term, list_models)
    _context_window(form, term)


def _say_locked(form: Form, term: Terminal, name: str) -> bool:
    var = form.locked(name)
    if var is not None:
        term.say(f"{form.key(name)} is set by the environment ({var}): kept, not asked")
    return var is not None


def _choose(term: Terminal, question: str, names: list[str], default: int) -> int:
    """The index of the choice: its number (from 1) or its exact name."""
    while True:
        answer = term.ask(question, str(default + 1))
        if answer.isdigit() and 1 <= int(answer) <= len(names):
            return int(answer) - 1
        if answer in names:
            return names.index(answer)
        term.say(f"Choose a number from 1 to {len(names)}.")


def _provider(form: Form, term: Terminal) -> None:
    now = preset_for(form.current("provider"), form.current("base_url"))
    if form.locked("provider") and form.locked("base_url"):
        _say_locked(form, term, "provider")
        _say_locked(form, term, "base_url")
        return
    presets = list(offered())
    if _say_locked(form, term, "provider"):
        presets = [p for p in presets if p.provider == form.current("provider")]
    if len(presets) > 1:
        term.say("Provider:")
        for i, p in enumerate(presets, 1):
            term.say(f"  {i:2}) {p.label}" + (f"  {p.base_url}" if p.base_url else ""))
        default = presets.index(now) if now in presets else len(presets) - 1
        preset = presets[_choose(term, "Choose", [p.name for p in presets], default)]
    else:
        preset = presets[0] if presets else now
    if not form.locked("provider"):
        form.set("provider", preset.provider)
    if preset is not GGUF and not _say_locked(form, term, "base_url"):
        form.set("base_url", _required(term, "Address (base URL, up to /v1)",
                                       _address_default(form, preset, now)))


def _address_default(form: Form, preset: Preset, now: Preset) -> str:
    """The current address when the preset chosen is the one in effect, else the preset's."""
    if preset is now:
        return str(form.current("base_url"))
    return preset.base_url


def _api_key(form: Form, term: Terminal) -> None:
    if _say_locked(form, term, "api_key"):
        return
    moved = form.key_moves_server()
    has_key = bool(form.current("api_key")) and not moved
    if moved:
        term.say("The current API key is for another server: it is not kept.")
    hint = (f"Enter keeps the current one, {REMOVE} removes it" if has_key
            else "Enter for none")
    key = term.secret(f"API key (not shown; {hint})")
    if key == REMOVE and has_key:
        form.set("api_key", "")
    elif key and key != REMOVE:
        form.set("api_key", key)
    elif moved:
        form.set("api_key", "")


def _model(form: Form, term: Terminal, list_models: ListModels) -> None:
    if _say_locked(form, term, "model"):
        return
    models, problem = list_models(form)
    default = str(form.current("model"))
    if not models:
        why = f" ({problem})" if problem else ""
        term.say(f"The server did not list its models{why}: type the model's name.")
        form.set("model", _required(term, "Model", default))
        return
    shown = models[:SHOWN_MODELS]
    term.say(f"The models at {form.value('base_url')}:")
    for i, name in enumerate(shown, 1):
        term.say(f"  {i:2}) {name}")
    if len(models) > len(shown):
        term.say(f"  ... and {len(models) - len(shown)} more: type a name")
    answer = _required(term, "Model (a number or a name)", default)
    if answer.isdigit() and 1 <= int(answer) <= len(shown) and answer not in models:
        answer = shown[int(answer) - 1]
    form.set("model", answer)


def _gguf(form: Form, term: Terminal) -> None:
    if _say_locked(form, term, "model"):
        return
    default = str(form.current("model")) if form.current("provider") == "llamacpp" else ""
    path = _required(term, "Path of the .gguf file", default)
    form.set("model", os.path.expanduser(path))


def _context_window(form: Form, term: Terminal) -> None:
    if _say_locked(form, term, "context_window"):
        return
    while True:
        answer = term.ask("Context window (tokens)", str(form.current("context_window")))
        if answer.isdigit() and int(answer) > 0:
            form.set("context_window", int(answer))
            return
        term.say("A positive whole number of tokens, e.g. 8192.")


def _required(term: Terminal, question: str, default: str) -> str:
    while True:
        answer = term.ask(question, default)
        if answer:
            return answer
        term.say("An answer is needed here.")
