"""Goal plans, the pure part: the schema a planning reply must follow, the reply read into a
Plan, every reason a plan cannot be used, and the order its steps run in.

When a goal starts, one structured-output call asks for `{"steps": [{"id", "description",
"depends_on"}], "confidence"}`. The reply's shape is checked strictly, except where small models
often slip: a confidence of 7 for "0 to 1" is clamped, numeric step ids become strings, and a
missing depends_on means none. A plan that reads is then judged by `problems`: its dependencies
must form a graph Kahn's algorithm can order (no unknown ids, no cycles), each description must
say one thing in 4 to 30 words, no two descriptions may be near-copies (word Jaccard < 0.7),
and the model must be more than half sure of it. The caller re-asks once with those problems,
which are written for the model to act on; then the goal runs without a plan, keeping them.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Sequence
from typing import Annotated, Any, TypeGuard

import msgspec

from chalie.errors import StructuredOutputError
from chalie.llm.structured import decode_structured, structured

MAX_STEPS = 12
MIN_WORDS, MAX_WORDS = 4, 30
MAX_JACCARD = 0.7  # two descriptions this similar or more are one step said twice
MIN_CONFIDENCE = 0.5  # a plan must be more confident than this

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # letters/digits, apostrophes inside a word kept
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})  # a curly apostrophe is a straight one


class PlannedStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    description: str
    depends_on: list[str]


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    steps: Annotated[list[PlannedStep], msgspec.Meta(min_length=1, max_length=MAX_STEPS)]
    confidence: Annotated[float, msgspec.Meta(ge=0, le=1)]


FORMAT = structured("plan", Plan)


def words(text: str) -> list[str]:
    """The words of a description: lower-cased runs of letters/digits (Unicode aware;
    apostrophes inside words kept, e.g. "don't")."""
    return _WORD.findall(text.translate(_APOSTROPHES).lower())


def jaccard(a: str, b: str) -> float:
    """Word-set Jaccard similarity of two texts (|A & B| / |A | B|, the shared words over all
    words); 0.0 when both are empty."""
    first, second = set(words(a)), set(words(b))
    union = first | second
    return len(first & second) / len(union) if union else 0.0


def parse(text: str) -> Plan:
    """A model reply as a Plan. A confidence outside 0-1 is clamped, numeric step ids (also in
    depends_on) become strings, a missing or null depends_on is []. Raises
    StructuredOutputError naming what is wrong."""
    raw: dict[str, Any] = decode_structured(text, dict[str, Any])
    confidence = raw.get("confidence")
    if _is_number(confidence):
        raw["confidence"] = min(1.0, max(0.0, float(confidence)))
    steps = raw.get("steps")
    for step in steps if isinstance(steps, list) else ():
        if not isinstance(step, dict):
            continue
        if _is_number(step.get("id")):
            step["id"] = _id_text(step["id"])
        depends_on = step.get("depends_on")
        if depends_on is None:
            step["depends_on"] = []
        elif isinstance(depends_on, list):
            step["depends_on"] = [_id_text(d) if _is_number(d) else d for d in depends_on]
    try:
        return msgspec.convert(raw, Plan)
    except msgspec.ValidationError as e:
        raise StructuredOutputError(f"the reply does not match the plan schema: {e}") from None


def problems(plan: Plan) -> list[str]:
    """Every reason the plan cannot be used, in a stable order (the order of the checks, then
    of the steps), each a sentence naming the steps involved. Empty: the plan is good."""
    steps = plan.steps
    found: list[str] = []
    if not steps:
        found.append("The plan has no steps; give at least one.")
    elif len(steps) > MAX_STEPS:
        found.append(f"The plan has {len(steps)} steps; use at most {MAX_STEPS}.")
    names = [_name(n, step) for n, step in enumerate(steps, 1)]
    uses: dict[str, int] = {}
    for step in steps:
        uses[step.id] = uses.get(step.id, 0) + 1
    for n, step in enumerate(steps, 1):
        if not step.id.strip():
            found.append(f"Step number {n} has a blank id; give every step a short unique id.")
    for step_id, count in uses.items():
        if count > 1 and step_id.strip():
            found.append(f'Step id "{step_id}" is used by {count} steps; '
                         "give every step a unique id.")
    for name, step in zip(names, steps, strict=True):
        if step.id in step.depends_on:
            found.append(f"Step {name} depends on itself; remove {name} from its depends_on.")
    for name, step in zip(names, steps, strict=True):
        for dep in dict.fromkeys(step.depends_on):
            if dep not in uses:
                found.append(f'Step {name} depends on "{dep}", which is not a step of the plan; '
                             "depend only on the ids of steps in the plan.")
    _, waiting = _kahn(plan)
    cycles = _cycles(waiting)
    if cycles:
        listed = ", ".join(f'"{step_id}"' for step_id in sorted(set().union(*cycles)))
        how = "a cycle" if len(cycles) == 1 else "cycles"
        found.append(f"Steps {listed} depend on each other in {how}; "
                     "remove a dependency so they can run one after another.")
    for name, step in zip(names, steps, strict=True):
        count = len(words(step.description))
        if not MIN_WORDS <= count <= MAX_WORDS:
            found.append(f"The description of step {name} has {count} "
                         f"word{'' if count == 1 else 's'}; "
                         f"describe each step in {MIN_WORDS} to {MAX_WORDS} words.")
    for i in range(len(steps)):
        for j in range(i + 1, len(steps)):
            similarity = jaccard(steps[i].description, steps[j].description)
            if similarity >= MAX_JACCARD:
                found.append(f"Steps {names[i]} and {names[j]} have near-identical descriptions "
                             f"(word similarity {similarity:.2f}); merge them or say how they "
                             "differ.")
    if plan.confidence <= MIN_CONFIDENCE:
        found.append(f"The plan's confidence is {plan.confidence:g}; it must be above "
                     f"{MIN_CONFIDENCE:g}, so make a plan you are more sure will reach the goal.")
    return found


def order(plan: Plan) -> list[str]:
    """Step ids in an order that respects dependencies (Kahn's algorithm; of the steps ready at
    once, the one earliest in the plan goes first). For plans with no problems: raises
    ValueError when steps depend on each other (or themselves) in a cycle."""
    ordered, waiting = _kahn(plan)
    if waiting:
        raise ValueError(f"the plan's steps {sorted(waiting)} can never run: they are in or "
                         "after a dependency cycle")
    return ordered


def ready(steps: Sequence[tuple[str, Sequence[str]]], done: Collection[str]) -> list[str]:
    """Ids of the steps not done whose dependencies are all done, in the given order.
    `steps` are (id, depends_on) pairs in plan order."""
    return [step_id for step_id, depends_on in steps
            if step_id not in done and all(dep in done for dep in depends_on)]


def coverage(total: int, done: int) -> float:
    """Share of the plan's steps done, rounded to 2 decimals; 0.0 for an empty plan."""
    return round(done / total, 2) if total > 0 else 0.0


# --- helpers --------------------------------------------------------------------------------------

def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _id_text(value: float) -> str:
    """A numeric id as the string a model meant: 2 and 2.0 are "2"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _name(n: int, step: PlannedStep) -> str:
    """How a message names the step at position `n` (1-based): its quoted id, or its number."""
    return f'"{step.id}"' if step.id.strip() else f"number {n}"


def _kahn(plan: Plan) -> tuple[list[str], dict[str, set[str]]]:
    """Kahn's algorithm over the step ids (a repeated id is one node with the dependencies of
    all its steps; unknown ids are ignored): the ids it could order, earliest-in-plan first among
    those ready together, and each id it could not order with the ids it waits on."""
    ids = list(dict.fromkeys(step.id for step in plan.steps))
    position = {step_id: n for n, step_id in enumerate(ids)}
    needs: dict[str, set[str]] = {step_id: set() for step_id in ids}
    for step in plan.steps:
        needs[step.id].update(dep for dep in step.depends_on if dep in position)
    dependents: dict[str, list[str]] = {step_id: [] for step_id in ids}
    for step_id, deps in needs.items():
        for dep in deps:
            dependents[dep].append(step_id)
    unmet = {step_id: len(deps) for step_id, deps in needs.items()}
    heap = [position[step_id] for step_id in ids if unmet[step_id] == 0]
    ordered: list[str] = []
    while heap:
        step_id = ids[heapq.heappop(heap)]
        ordered.append(step_id)
        for dependent in dependents[step_id]:
            unmet[dependent] -= 1
            if unmet[dependent] == 0:
                heapq.heappush(heap, position[dependent])
    return ordered, {step_id: needs[step_id] for step_id in ids if unmet[step_id] > 0}


def _cycles(waiting: dict[str, set[str]]) -> list[frozenset[str]]:
    """The cycles among the steps Kahn's algorithm left waiting, as sets of ids (strongly
    connected groups). Steps left only because they wait on a cycle, and self-dependencies
    (reported on their own), are not cycles here."""
    reach = {step_id: _reachable(step_id, waiting) for step_id in waiting}
    cyclic = [step_id for step_id in waiting if step_id in reach[step_id]]
    groups = {frozenset(other for other in cyclic if other in reach[step_id]
                        and step_id in reach[other]) for step_id in cyclic}
    return sorted(groups, key=sorted)


def _reachable(start: str, waiting: dict[str, set[str]]) -> set[str]:
    """The waiting ids `start` waits on, directly or through others, not counting self-edges."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        step_id = stack.pop()
        for dep in waiting.get(step_id, ()):
            if dep != step_id and dep in waiting and dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen
