"""Prompt files from prompts/, checked once at start-up and rendered per call."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from string import Template

from chalie.errors import PromptError
from chalie.paths import PROMPTS

# file -> the placeholders its caller fills in
_EXPECTED: dict[str, frozenset[str]] = {
    "act_system": frozenset({"identity"}),
    "act_user": frozenset({"now", "state", "situation", "world", "memory", "history",
                           "user_text", "trail"}),
    "act_final": frozenset(),
    "compact_trail": frozenset({"user_text", "trail"}),
    "checkpoint": frozenset({"state", "history", "user_text", "trail"}),
    "episode_encoding": frozenset({"count", "lines", "known"}),
    "interface_message": frozenset({"program", "message"}),
    "mcp_question": frozenset({"program", "text"}),
    "scheduled": frozenset({"now", "state", "situation", "world", "memory", "history",
                            "trail", "prompt", "created", "due"}),
    "plan": frozenset({"goal", "tools"}),
    "critic": frozenset({"user_text", "steering", "tool", "args", "result"}),
    "dmn": frozenset({"now", "state", "situation", "world", "memory", "history", "trail",
                      "loops", "goals", "trigger", "nothing", "concepts"}),
    "goal_step": frozenset({"now", "state", "situation", "world", "memory", "history",
                            "trail", "goal", "plan", "step_id", "step", "last"}),
    "goal_plain": frozenset({"now", "state", "situation", "world", "memory", "history",
                             "trail", "goal"}),
    "tools_in_prompt": frozenset({"system", "tools"}),
    "doctor_tool": frozenset({"word"}),
    "doctor_structured": frozenset({"word", "number"}),
}


# fragments.toml key -> the placeholders its caller fills in
_FRAGMENTS: dict[str, frozenset[str]] = {
    "state_empty": frozenset(), "checkpoint_state_empty": frozenset(),
    "situation": frozenset({"text"}), "situation_empty": frozenset(),
    "world_empty": frozenset(), "world_state": frozenset({"items"}),
    "fence": frozenset({"source", "text"}), "fence_signals": frozenset(),
    "fence_message": frozenset({"program"}), "fence_program": frozenset({"program"}),
    "fence_result": frozenset({"tool", "provider"}),
    "world_signal": frozenset({"signal_type", "source", "age", "salience", "topic", "content"}),
    "world_topic": frozenset({"topic"}),
    "conversation_state": frozenset({"lines"}),
    "conversation_topic": frozenset({"topic", "streak"}),
    "conversation_focus": frozenset({"focus"}), "conversation_phase": frozenset({"phase"}),
    "conversation_confidence": frozenset({"confidence", "mode"}),
    "trait_length_short": frozenset(), "trait_length_medium": frozenset(),
    "trait_length_long": frozenset(), "trait_hours": frozenset({"hours"}),
    "trait_language": frozenset({"language"}), "trait_tone_casual": frozenset(),
    "trait_tone_formal": frozenset(),
    "mode_respond": frozenset(), "mode_clarify": frozenset(), "mode_act": frozenset(),
    "mode_acknowledge": frozenset(),
    "situation_summary": frozenset({"text"}), "situation_loops": frozenset({"items"}),
    "situation_people": frozenset({"items"}),
    "situation_places": frozenset({"items"}), "situation_decisions": frozenset({"items"}),
    "interface_source": frozenset({"source"}), "interface_topic": frozenset({"topic"}),
    "interface_metadata": frozenset({"metadata"}),
    "memory_empty": frozenset(), "history_empty": frozenset(),
    "identity_empty": frozenset(), "identity_name": frozenset({"name"}),
    "identity_item": frozenset({"key", "value"}), "identity_adaptive": frozenset({"trait"}),
    "recalled_day": frozenset({"date"}), "recalled_person": frozenset({"text"}),
    "recalled_assistant": frozenset({"text"}), "recalled_episode": frozenset({"text"}),
    "recalled_program": frozenset({"text"}),
    "recalled_fact": frozenset({"text"}), "memory_episode": frozenset({"date", "text"}),
    "history_none_since_state": frozenset(), "trail_empty": frozenset(),
    "history_person": frozenset({"text"}), "history_assistant": frozenset({"text"}),
    "history_program": frozenset({"text"}),
    "trail_tool": frozenset({"n", "name", "args", "result"}),
    "trail_steering": frozenset({"n", "text"}), "trail_note": frozenset({"n", "text"}),
    "note_trail_summary": frozenset({"summary"}), "note_restart": frozenset(),
    "note_draft_dropped": frozenset({"text"}), "not_run": frozenset({"reason"}),
    "note_critic_correctable": frozenset({"name", "reason"}),
    "note_critic_attention": frozenset({"name", "reason"}),
    "critic_steering": frozenset({"text"}), "critic_no_steering": frozenset(),
    "reason_steered": frozenset(), "reason_redirected": frozenset(),
    "reason_denied": frozenset(), "reason_expired": frozenset({"seconds"}),
    "reason_blocked": frozenset({"name"}), "reason_unattended": frozenset({"name"}),
    "reason_repeated": frozenset({"times"}), "reason_held": frozenset(),
    "encoding_line": frozenset({"n", "who", "time", "text"}),
    "encoding_person": frozenset(), "encoding_assistant": frozenset(),
    "encoding_program": frozenset({"program"}),
    "encoding_retry": frozenset({"error"}),
    "encoding_known": frozenset({"facts"}), "encoding_known_none": frozenset(),
    "fact_history": frozenset({"text", "since", "before"}),
    "fact_candidate": frozenset({"id", "key", "value", "since"}),
    "memory_candidates": frozenset({"facts"}),
    "plan_retry": frozenset({"problems"}), "plan_no_tools": frozenset(),
    "goal_plan_step": frozenset({"status", "id", "description", "result"}),
    "goal_last_step": frozenset(), "goal_next_step": frozenset(),
    "dmn_idle": frozenset({"since"}), "dmn_cadence": frozenset(), "dmn_none": frozenset(),
    "dmn_signal": frozenset({"signals"}),
    "dmn_loop": frozenset({"id", "date", "text"}), "dmn_episode_loop": frozenset({"text"}),
    "dmn_goal": frozenset({"id", "state", "goal"}),
    "dmn_concept": frozenset({"name", "activation"}), "drift_gists": frozenset({"items"}),
}


NARRATED_CHARS = 60  # of an argument's value, in a narration sentence


_FENCE_MARKS = (("<<<", "\u2039\u2039\u2039"), (">>>", "\u203a\u203a\u203a"))
_HEADING = re.compile(r"^(\s*)#", re.MULTILINE)


def defuse(text: str) -> str:
    """`text` made safe to put inside a fence: its fence marks ("<<<", ">>>", however many
    in a row) turned into look-alike quotes, and a line that would start a heading escaped."""
    for mark, safe in _FENCE_MARKS:
        text = text.replace(mark, safe)
    return _HEADING.sub(r"\1\\#", text)


class Prompts:
    def __init__(self, templates: dict[str, Template], fragments: dict[str, Template],
                 narration: Narration | None = None) -> None:
        self._templates = templates
        self._fragments = fragments
        self._narration = narration or Narration({}, [Template("Using $name…")])

    @classmethod
    def load(cls, directory: Path = PROMPTS) -> Prompts:
        templates = {}
        for name, expected in _EXPECTED.items():
            path = directory / f"{name}.md"
            try:
                template = Template(path.read_text(encoding="utf-8"))
            except OSError as e:
                raise PromptError(f"cannot read prompt {path}: {e}") from e
            unknown = set(template.get_identifiers()) - expected
            if unknown or not template.is_valid():
                raise PromptError(
                    f"prompt {path} uses unknown placeholders {sorted(unknown)}; "
                    f"allowed: {sorted(expected)}"
                )
            templates[name] = template
        return cls(templates, _load_fragments(directory / "fragments.toml"),
                   _load_narration(directory / "narration.toml"))

    def render(self, name: str, **values: str) -> str:
        return self._templates[name].substitute(values).strip()

    def render_split(self, name: str, at: str, **values: str) -> tuple[str, str]:
        """`render(name, ...)` cut in two right after the value of placeholder `at`: the text
        up to and including it, and the rest; ("", all of it) when the prompt has no `at`.
        The two joined are what `render` gives. A request's cache boundary is found this way
        (chalie/act/loop.py cuts after the history), whatever order an edited prompt has."""
        template = self._templates[name]
        source = template.template
        for m in template.pattern.finditer(source):
            if at in (m.group("named"), m.group("braced")):
                head = Template(source[:m.end()]).substitute(values).lstrip()
                tail = Template(source[m.end():]).substitute(values).rstrip()
                return (head, tail) if head else ("", tail.lstrip())
        return "", self.render(name, **values)

    def fragment(self, key: str, /, **values: object) -> str:
        """A short piece of prompt text from fragments.toml."""
        return self._fragments[key].substitute(values)

    def fence(self, source: str, text: str) -> str:
        """Text from outside the person (a program's signal, message or tool result), as every
        prompt shows it: inside the `fence` fragment, which names where it came from. Nothing
        in it can close the fence or open another ("<<<" and ">>>" are defused) or pass for a
        heading of the prompt; act_system.md tells the model fenced text is data, never the
        person's instructions."""
        return self._fragments["fence"].substitute(
            source=defuse(" ".join(source.split())), text=defuse(text))

    def message_of(self, program: str | None, text: str) -> str:
        """What a paired program said to Chalie (its message), fenced, naming the program."""
        return self.fence(self.fragment("fence_message", program=program or "?"), text)

    def narrate(self, tool: str, args: object) -> str:
        """The sentence a person reads while `tool` runs with `args` (narration.toml)."""
        return self._narration.sentence(tool, args)


class Narration:
    """narration.toml: sentences per tool (or tool.action), the first one the call fills."""

    def __init__(self, tools: dict[str, list[Template]], default: list[Template]) -> None:
        self._tools = tools
        self._default = default

    def sentence(self, tool: str, args: object) -> str:
        given = args if isinstance(args, dict) else {}
        values = {k: _shown(v) for k, v in given.items()
                  if isinstance(k, str) and isinstance(v, str | int | float) and str(v).strip()}
        action = given.get("action")
        templates = (self._tools.get(f"{tool}.{action}") if isinstance(action, str) else None) \
            or self._tools.get(tool)
        if templates is None:
            templates, values = self._default, {"name": " ".join(
                tool.replace("_", " ").replace(".", " ").replace("-", " ").split()) or tool}
        for template in templates:
            if set(template.get_identifiers()) <= set(values):
                return template.substitute(values)
        return self._default[-1].substitute(name=tool)


def _shown(value: str | int | float) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= NARRATED_CHARS else text[:NARRATED_CHARS].rstrip() + "…"


def _load_narration(path: Path) -> Narration:
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PromptError(f"cannot read narration sentences {path}: {e}") from e

    def sentences(key: str, value: object) -> list[Template]:
        if not isinstance(value, list) or not value or not all(
                isinstance(v, str) and Template(v).is_valid() for v in value):
            raise PromptError(f"{path}: {key} must be a list of sentences")
        return [Template(v) for v in value]

    default = sentences("default", raw.get("default"))
    if set().union(*(t.get_identifiers() for t in default)) - {"name"}:
        raise PromptError(f"{path}: default may use only $name")
    tools = raw.get("tools", {})
    if not isinstance(tools, dict):
        raise PromptError(f"{path}: [tools] must be a table")
    return Narration({k: sentences(f"tools.{k}", v) for k, v in tools.items()}, default)


def _load_fragments(path: Path) -> dict[str, Template]:
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PromptError(f"cannot read prompt fragments {path}: {e}") from e
    missing = sorted(set(_FRAGMENTS) - set(raw))
    unknown = sorted(set(raw) - set(_FRAGMENTS))
    if missing or unknown:
        raise PromptError(f"{path}: missing fragments {missing}, unknown fragments {unknown}")
    fragments = {}
    for name, text in raw.items():
        template = Template(str(text))
        extra = set(template.get_identifiers()) - _FRAGMENTS[name]
        if extra or not template.is_valid():
            raise PromptError(f"{path}: fragment {name} uses unknown placeholders {sorted(extra)};"
                              f" allowed: {sorted(_FRAGMENTS[name])}")
        fragments[name] = template
    return fragments
