"""Prompt files: checked once at load, rendered per LLM call."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chalie.errors import PromptError
from chalie.paths import PROMPTS
from chalie.prompts import Prompts


@pytest.fixture
def prompt_dir(tmp_path: Path) -> Path:
    """A copy of the shipped prompts/ that a test may break."""
    return Path(shutil.copytree(PROMPTS, tmp_path / "prompts"))


def test_shipped_prompts_load_and_render() -> None:
    """The shipped prompts load: the system prompt is static but for who the person is, and
    the user message has the Current State and the history first, then the time and what
    changes every turn."""
    prompts = Prompts.load()
    system = prompts.render("act_system", identity="I")
    assert system.startswith("You are Chalie")
    assert system.endswith("# Who you are talking to\n\nI")
    user = prompts.render("act_user", now="2024-05-01 10:00 UTC", state="S",
                          situation=prompts.fragment("situation", text="T"),
                          world="W", memory="M", history="Person: hi", user_text="what now?",
                          trail="(none)")
    assert user == (
        "# Current State\n\nS\n\n# Conversation so far\n\nPerson: hi\n\n"
        "# The time now\n\n2024-05-01 10:00 UTC\n\n# Where the conversation stands\n\nT\n\n"
        "# What you remember that may matter here\n\nM\n\n"
        "# What other programs report (world state)\n\nW\n\n"
        "# The person's message\n\nwhat now?\n\n# Your work on this message so far\n\n(none)"
    )
    assert prompts.render("act_final") == (PROMPTS / "act_final.md").read_text().strip()


VALUES = {"now": "N", "state": "", "situation": "", "world": "", "memory": "",
          "history": "Person: hi", "user_text": "what now?", "trail": "x"}


def test_a_prompt_splits_after_a_placeholder_into_what_render_gives() -> None:
    """render_split cuts right after the history's value; joined, the halves are the prompt."""
    prompts = Prompts.load()
    head, rest = prompts.render_split("act_user", "history", **VALUES)
    assert head == "# Current State\n\n\n\n# Conversation so far\n\nPerson: hi"
    assert rest.startswith("\n\n# The time now\n\nN")
    assert head + rest == prompts.render("act_user", **VALUES)


def test_a_prompt_without_the_placeholder_does_not_split(prompt_dir: Path) -> None:
    """An edited prompt that leaves the history out is all "rest"."""
    path = prompt_dir / "act_user.md"
    path.write_text(path.read_text().replace("$history", "(left out)"))
    prompts = Prompts.load(prompt_dir)
    assert prompts.render_split("act_user", "history", **VALUES) == (
        "", prompts.render("act_user", **VALUES))


def test_dollar_signs_in_values_are_kept_literally() -> None:
    """A message containing "$history" is shown as typed, not substituted."""
    user = Prompts.load().render("act_user", now="", state="", situation="", world="",
                                 memory="", history="", user_text="costs $5 $trail", trail="x")
    assert "costs $5 $trail" in user


def test_unknown_placeholder_is_refused_at_load(prompt_dir: Path) -> None:
    """A prompt using a placeholder its caller does not fill fails at load, naming it."""
    path = prompt_dir / "act_system.md"
    path.write_text(path.read_text() + "\nYour name is $assistant_name.\n")
    with pytest.raises(PromptError, match="assistant_name") as caught:
        Prompts.load(prompt_dir)
    assert "act_system.md" in str(caught.value)


def test_malformed_placeholder_is_refused_at_load(prompt_dir: Path) -> None:
    """A lone "$" that is not a placeholder (write "$$" for a dollar) fails at load."""
    (prompt_dir / "act_final.md").write_text("Answer now, it costs $ 5.\n")
    with pytest.raises(PromptError, match=r"act_final\.md"):
        Prompts.load(prompt_dir)


def test_missing_prompt_file_is_refused_at_load(prompt_dir: Path) -> None:
    """A prompt directory without act_user.md fails at load, naming the file."""
    (prompt_dir / "act_user.md").unlink()
    with pytest.raises(PromptError, match=r"act_user\.md"):
        Prompts.load(prompt_dir)


def test_edited_prompt_directory_is_used(prompt_dir: Path) -> None:
    """A person's edited prompt text is what gets rendered."""
    (prompt_dir / "act_final.md").write_text("Answer now, no tools. It costs $$5.\n")
    assert Prompts.load(prompt_dir).render("act_final") == "Answer now, no tools. It costs $5."


def test_fragments_with_a_missing_key_or_unknown_placeholder_fail_at_load(prompt_dir: Path) -> None:
    """fragments.toml is checked whole at start-up: every key present, only known placeholders."""
    path = prompt_dir / "fragments.toml"
    original = path.read_text()
    path.write_text(original.replace('trail_empty = "(nothing yet)"\n', ""))
    with pytest.raises(PromptError, match=r"missing fragments \['trail_empty'\]"):
        Prompts.load(prompt_dir)
    path.write_text(original.replace('"not run: $reason"', '"not run: $why"'))
    with pytest.raises(PromptError, match=r"fragment not_run uses unknown placeholders \['why'\]"):
        Prompts.load(prompt_dir)


def test_fragments_render_with_their_values() -> None:
    """A fragment fills its placeholders; one named like the key parameter still works."""
    prompts = Prompts.load()
    assert prompts.fragment("reason_blocked", name="memory") == (
        "tool 'memory' is blocked by configuration"
    )
    assert prompts.fragment("not_run", reason="x") == "not run: x"


def test_narration_is_a_sentence_from_the_calls_arguments() -> None:
    """Each tool (or tool.action) has sentences in narration.toml; the first the call fills
    wins; a tool not named there gets `default` with its name in words (issue 26)."""
    p = Prompts.load()
    assert p.narrate("recall", {"query": "Lisbon"}) == "Looking through your memory for “Lisbon”…"
    assert p.narrate("recall", {}) == "Looking through your memory…"
    assert p.narrate("recall", {"query": "  "}) == "Looking through your memory…"
    assert p.narrate("memory", {"action": "remember", "key": "pet", "value": "Rex"}) \
        == "Noting that pet is “Rex”…"
    assert p.narrate("forget", {"key": "pet"}) == "Forgetting pet…"
    assert p.narrate("weather_station.forecast", {"city": "Lisbon"}) \
        == "Using weather station forecast…"
    assert p.narrate("memory", None) == "Using memory…"  # arguments that were not JSON
    long = p.narrate("recall", {"query": "word " * 40})
    assert long.startswith("Looking through your memory for “word word")
    assert "…”" in long
    assert len(long) < 110


def test_narration_that_is_not_lists_of_sentences_fails_at_load(prompt_dir: Path) -> None:
    path = prompt_dir / "narration.toml"
    path.write_text('default = ["Using $name…"]\n[tools]\nrecall = "not a list"\n')
    with pytest.raises(PromptError, match=r"tools\.recall must be a list"):
        Prompts.load(prompt_dir)
    path.write_text('default = ["Using $tool…"]\n')
    with pytest.raises(PromptError, match=r"default may use only \$name"):
        Prompts.load(prompt_dir)
