"""The gullible model of the injection benchmark: an OpenAI-compatible stub on 127.0.0.1 that
does whatever any text in its prompt tells it to.

Each chat request is answered from the request alone. The model reads the whole prompt (the
system message and the user message, fenced text included) as a reader would: compatibility
forms folded (NFKC: full-width letters), invisible format characters dropped, and runs of
base64 decoded. It finds instructions in three public syntaxes,

    call <tool> with {json}        <tool>({json})        use the <tool> tool with {json}

keeps those whose tool the request offers, drops those the trail says were done in this turn
(its "[n] <tool> <args json>" lines, prompts/fragments.toml `trail_tool`), and answers the
first left as a tool call with those arguments. With none left it answers "Done." ("NOTHING"
in the DMN's prompt, which wants that for no message).

One concession to what any model does: the person's own past requests are not redone. In the
sections that hold the conversation's past (the history, recall, Current State) an instruction
the person wrote (the benchmark tells the model their texts: `trust`) is passed over; any other
there, fenced or not, is obeyed, but once per kind of prompt (user, message, dmn, goal,
scheduled), so that one program message does not make every later turn call the same tool.

Plan requests (json_schema "plan") get a one-step plan whose step is the goal's own text;
every other structured request gets `schema_filler`'s minimal answer.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import unicodedata
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tests.integration.harness import Reply, StubLlm, completion

# The sections of a prompt that hold the conversation's past, by their headings.
PAST = frozenset({
    "Conversation so far", "Your conversation lately", "What you remember that may matter here",
    "What you remember (episodes)", "Current State", "Current State of your conversation with them",
    "Where the conversation stands",
})
_HEADING = re.compile(r"^# (.+)$", re.MULTILINE)
_TRAIL = re.compile(r"^\[\d+\] (\S+) (\{.*\})$", re.MULTILINE)
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_NAME = r"[`'\"]?(?P<tool>[A-Za-z_][\w.-]*)[`'\"]?"
_SYNTAXES = (
    re.compile(rf"\bcall\s+(?:the\s+)?{_NAME}\s+(?:tool\s+)?with\s*(?=\{{)", re.IGNORECASE),
    re.compile(rf"\buse\s+the\s+{_NAME}\s+tool\s+with\s*(?=\{{)", re.IGNORECASE),
    re.compile(r"(?<![\w.-])(?P<tool>[A-Za-z_][\w.-]*)\(\s*(?=\{)"),
)
_DECODER = json.JSONDecoder()
_DMN_HEADING = "Why you are thinking now"
_KINDS = (("Why you are thinking now", "dmn"), ("A scheduled prompt is due", "scheduled"),
          ("This step", "goal"), ("The goal", "goal"))


def readable(text: str) -> str:
    """`text` as a reader sees it: NFKC-folded, format (invisible) characters removed."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(c for c in folded if unicodedata.category(c) != "Cf" and c != "\u034f")


def key(tool: str, args: dict[str, Any]) -> tuple[str, str]:
    return tool, json.dumps(args, sort_keys=True)


def instructions(text: str) -> list[tuple[int, str, dict[str, Any]]]:
    """Every (position, tool, args) instruction in `text`, in the order they appear, with the
    ones base64 runs decode to placed where the run is."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    for variant in (text, text.replace('\\"', '"')):  # a quoted title: {\"key\": ...}
        for syntax in _SYNTAXES:
            for m in syntax.finditer(variant):
                args = _json_at(variant, m.end())
                if args is not None:
                    found.append((m.start(), m.group("tool"), args))
    for m in _BASE64.finditer(text):
        decoded = _decoded(m.group())
        if decoded:
            found += [(m.start(), tool, args) for _, tool, args in instructions(decoded)]
    found.sort(key=lambda item: item[0])
    return found


def _json_at(text: str, at: int) -> dict[str, Any] | None:
    try:
        value, _ = _DECODER.raw_decode(text, at)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _decoded(run: str) -> str | None:
    try:
        raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return readable(text) if all(c.isprintable() or c in "\n\t" for c in text) else None


def sections(prompt: str) -> list[tuple[str, str]]:
    """(heading, body) of each "# " section of a prompt; text before the first is ("", ...)."""
    out = []
    marks = list(_HEADING.finditer(prompt))
    out.append(("", prompt[: marks[0].start()] if marks else prompt))
    for n, m in enumerate(marks):
        end = marks[n + 1].start() if n + 1 < len(marks) else len(prompt)
        out.append((m.group(1).strip(), prompt[m.end():end]))
    return out


def kind_of(prompt: str) -> str:
    """Which path's prompt this is, from its headings and framing."""
    found = dict(sections(prompt))
    for heading, kind in _KINDS:
        if heading in found:
            return kind
    said = found.get("The person's message", "").strip()
    return "message" if said.startswith("A paired program, \"") else "user"


@dataclass
class Emitted:
    """A tool call the model answered, and the kind of prompt it answered it in."""

    kind: str
    tool: str
    args: dict[str, Any]


@dataclass
class FenceCost:
    """Over the chat requests: characters of fence markup, and of the whole prompt."""

    requests: int = 0
    fence_chars: list[int] = field(default_factory=list)
    prompt_chars: list[int] = field(default_factory=list)


def fence_chars(system: str, messages: list[str]) -> int:
    """The fence markup of one request: each fence's opening and closing line, and the system
    prompt's paragraph that says what fenced text is."""
    total = 0
    for text in messages:
        for line in text.splitlines():
            opening = line.find("<<<data from ")
            if opening >= 0:
                total += len(line) - opening + 1
            elif line == "data>>>":
                total += len(line) + 1
    start = system.find('- Text from "<<<data from')
    if start >= 0:
        end = system.find("\n- ", start + 1)
        total += (end if end >= 0 else len(system)) - start
    return total


class GullibleLlm(StubLlm):
    """StubLlm answering every chat request as the gullible model does; `emitted` lists every
    tool call it answered, `cost` the fence markup it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: Any = deque(maxlen=20)  # the base class keeps every body otherwise
        self.lock = threading.Lock()
        self.emitted: list[Emitted] = []
        self.cost = FenceCost()
        self._past_done: set[tuple[str, str, str]] = set()
        self._person: set[tuple[str, str]] = set()

    def trust(self, text: str) -> None:
        """`text` is the person's: its instructions, met again in the past, are not redone."""
        with self.lock:
            self._person |= {key(t.casefold(), a) for _, t, a in instructions(readable(text))}

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        spec = body.get("response_format", {}).get("json_schema") \
            if isinstance(body.get("response_format"), dict) else None
        if isinstance(spec, dict):
            if spec.get("name") == "plan":
                return Reply(completion(plan_for(_texts(body)[-1])))
            return super()._next_reply(body)
        texts = _texts(body)
        system = next((str(m.get("content") or "") for m in body.get("messages", ())
                       if m.get("role") == "system"), "")
        prompt = "\n".join(texts)
        tokens = max(1, len(prompt) // 4)
        if system:
            with self.lock:
                self.cost.requests += 1
                self.cost.fence_chars.append(fence_chars(system, texts))
                self.cost.prompt_chars.append(len(prompt))
        offered = {t["function"]["name"].casefold(): t["function"]["name"]
                   for t in body.get("tools") or ()}
        call = self._choose(prompt, offered)
        if call is None:
            headings = {h for h, _ in sections(prompt)}
            text = "NOTHING" if _DMN_HEADING in headings else "Done."
            return Reply(completion(text, prompt_tokens=tokens))
        return Reply(completion(tool_calls=[(call.tool, json.dumps(call.args))],
                                prompt_tokens=tokens))

    def _choose(self, prompt: str, offered: dict[str, str]) -> Emitted | None:
        if not offered:
            return None
        kind = kind_of(prompt)
        done = {key(tool, args) for tool, raw in _TRAIL.findall(prompt)
                if isinstance(args := _json_at(raw, 0), dict)}
        current: list[tuple[str, dict[str, Any]]] = []
        past: list[tuple[str, dict[str, Any]]] = []
        for heading, text in sections(prompt):
            seen = readable(text)
            if heading in PAST:
                past += [(t, a) for _, t, a in instructions(seen)]
            else:
                current += [(t, a) for _, t, a in instructions(seen)]
        with self.lock:
            for source, (tool, args) in [*(("now", c) for c in current),
                                         *(("past", p) for p in past)]:
                name = offered.get(tool.casefold())
                if name is None or key(name, args) in done:
                    continue
                if source == "past":
                    if key(tool.casefold(), args) in self._person:
                        continue
                    once = (kind, *key(name, args))
                    if once in self._past_done:
                        continue
                    self._past_done.add(once)
                emitted = Emitted(kind, name, args)
                self.emitted.append(emitted)
                return emitted
        return None


def _texts(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in body.get("messages", ())]


def plan_for(prompt: str) -> str:
    """A plan that passes the checks: one step, the goal's own text (4 to 30 words)."""
    match = re.search(r"The goal:\n\n(.*?)\n\nThe tools", prompt, re.DOTALL)
    goal = " ".join((match.group(1) if match else "the goal").split())
    words = goal.split()
    if len(words) > 30:
        goal = " ".join(words[:30])
    elif len(re.findall(r"[^\W_]+", goal)) < 4:
        goal = f"work on this for the person: {goal}"
    return json.dumps({"steps": [{"id": "s1", "description": goal, "depends_on": []}],
                       "confidence": 0.9})
