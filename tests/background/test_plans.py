"""Goal plans, the pure part: how a planning reply is read (lenient where small models slip,
strict on shape), every reason a plan is refused as the model will read it when re-asked, and
the order in which a good plan's steps run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalie.background import plans
from chalie.background.plans import MAX_STEPS, Plan, PlannedStep
from chalie.errors import StructuredOutputError

# Distinct descriptions of 5 words each: no two share enough words to look like copies.
DESCRIPTIONS = {
    "a": "Find three flights to Lisbon",
    "b": "Compare hotel prices near Alfama",
    "c": "Book the cheapest refundable room",
    "d": "Email the itinerary to Sam",
}


def step(step_id: str, *depends_on: str, description: str | None = None) -> PlannedStep:
    """A step whose description defaults to a distinct, well-sized one."""
    text = description if description is not None else DESCRIPTIONS.get(
        step_id, f"Carry out the part called {step_id}")
    return PlannedStep(id=step_id, description=text, depends_on=list(depends_on))


def plan(*steps: PlannedStep, confidence: float = 0.9) -> Plan:
    return Plan(steps=list(steps), confidence=confidence)


def reply(steps: list[dict[str, Any]] | None = None, **fields: Any) -> str:
    """A planning reply as a model would send it: one good step unless told otherwise."""
    body: dict[str, Any] = {"steps": steps if steps is not None else [
        {"id": "a", "description": DESCRIPTIONS["a"], "depends_on": []}], "confidence": 0.8}
    return json.dumps(body | fields)


# -- the schema --

def test_the_format_asks_for_a_flat_object_with_steps_and_confidence_required() -> None:
    """The response_format is one closed object with no $refs: steps (1 to 12 closed step
    objects, every field required) and a confidence between 0 and 1."""
    schema = plans.FORMAT.schema
    assert plans.FORMAT.name == "plan"
    assert schema["type"] == "object"
    assert schema["required"] == ["steps", "confidence"]
    assert schema["additionalProperties"] is False
    assert "$ref" not in json.dumps(schema)
    assert "$defs" not in schema
    steps = schema["properties"]["steps"]
    assert (steps["minItems"], steps["maxItems"]) == (1, MAX_STEPS)
    assert steps["items"]["required"] == ["id", "description", "depends_on"]
    assert steps["items"]["additionalProperties"] is False
    confidence = schema["properties"]["confidence"]
    assert (confidence["minimum"], confidence["maximum"]) == (0, 1)


# -- words and similarity --

def test_words_are_lower_cased_letter_and_digit_runs_keeping_inner_apostrophes() -> None:
    """Punctuation splits words, case is ignored, "don't" stays one word and accents count."""
    assert plans.words("Don't book 2 CAFÉS—today, 'please'!") == [
        "don't", "book", "2", "cafés", "today", "please"]
    assert plans.words("don\u2019t") == ["don't"]
    assert plans.words("snake_case") == ["snake", "case"]
    assert plans.words("  ...  ") == []


def test_jaccard_compares_the_sets_of_words_of_two_texts() -> None:
    """Shared words over all words, regardless of case and repetition; two empty texts are 0."""
    assert plans.jaccard("Book the room", "book THE room room") == 1.0
    assert plans.jaccard("a b c d", "a b x y") == pytest.approx(2 / 6)
    assert plans.jaccard("a b", "c d") == 0.0
    assert plans.jaccard("", "") == 0.0
    assert plans.jaccard("", "word") == 0.0


# -- problems --

def test_a_good_three_step_plan_has_no_problems_and_runs_dependencies_first() -> None:
    """Flights and hotels before booking: nothing to refuse, and the order puts "c" last."""
    good = plan(step("c", "a", "b"), step("a"), step("b", "a"))
    assert plans.problems(good) == []
    assert plans.order(good) == ["a", "b", "c"]


def test_a_cyclic_plan_is_refused_naming_the_steps_in_the_cycle() -> None:
    """A -> B -> C -> A is named, sorted; a step that only waits on the cycle is not in it."""
    cyclic = plan(step("c", "b"), step("a", "c"), step("b", "a"), step("d", "a"))
    assert plans.problems(cyclic) == [
        'Steps "a", "b", "c" depend on each other in a cycle; '
        "remove a dependency so they can run one after another."]
    with pytest.raises(ValueError, match="cycle"):
        plans.order(cyclic)


def test_two_separate_cycles_are_named_together_in_one_sentence() -> None:
    """Both loops' steps are listed, sorted, and the sentence says there are cycles."""
    (message,) = plans.problems(plan(step("a", "b"), step("b", "a"), step("c", "d"),
                                     step("d", "c")))
    assert message.startswith('Steps "a", "b", "c", "d" depend on each other in cycles;')


def test_a_step_depending_on_itself_is_refused_by_name_and_cannot_be_ordered() -> None:
    """The self-dependency is reported once, not again as a cycle."""
    selfish = plan(step("a"), step("b", "b", "a"))
    assert plans.problems(selfish) == [
        'Step "b" depends on itself; remove "b" from its depends_on.']
    with pytest.raises(ValueError, match="cycle"):
        plans.order(selfish)


def test_a_dependency_on_an_unknown_step_is_refused_naming_both_ids() -> None:
    """The step and the id it wrongly names are both in the message, once each."""
    assert plans.problems(plan(step("a"), step("b", "a", "z", "z"))) == [
        'Step "b" depends on "z", which is not a step of the plan; '
        "depend only on the ids of steps in the plan."]


def test_duplicate_and_blank_step_ids_are_refused() -> None:
    """A repeated id says how many steps use it; a blank id is named by its position."""
    found = plans.problems(plan(step("a"), step("b"), step("a", description=DESCRIPTIONS["c"]),
                                step(" ", description=DESCRIPTIONS["d"])))
    assert found == [
        "Step number 4 has a blank id; give every step a short unique id.",
        'Step id "a" is used by 2 steps; give every step a unique id.',
    ]


def test_descriptions_too_short_or_too_long_are_refused_with_their_word_count() -> None:
    """Three words is too few, thirty-one too many; four and thirty are accepted."""
    long_text = " ".join(f"w{n}" for n in range(31))
    found = plans.problems(plan(
        step("short", description="Book a flight"),
        step("four", description="Pack two bags tonight"),
        step("thirty", description=" ".join(f"x{n}" for n in range(30))),
        step("long", description=long_text),
        step("one", description="Go!"),
    ))
    assert found == [
        'The description of step "short" has 3 words; describe each step in 4 to 30 words.',
        'The description of step "long" has 31 words; describe each step in 4 to 30 words.',
        'The description of step "one" has 1 word; describe each step in 4 to 30 words.',
    ]


def test_near_duplicate_descriptions_are_refused_naming_both_steps_and_the_similarity() -> None:
    """Seven shared words of eight (0.88) is the same step said twice; 0.7 exactly is too."""
    found = plans.problems(plan(
        step("a", description="Book the cheapest refundable room in Lisbon"),
        step("b", description="Book the cheapest refundable room in Lisbon today"),
        step("c", description="one two three four five six seven"),
        step("d", description="one two three four five six seven eight nine ten"),
    ))
    assert found == [
        'Steps "a" and "b" have near-identical descriptions (word similarity 0.88); '
        "merge them or say how they differ.",
        'Steps "c" and "d" have near-identical descriptions (word similarity 0.70); '
        "merge them or say how they differ.",
    ]


def test_a_confidence_of_exactly_one_half_is_refused_and_just_above_it_accepted() -> None:
    """0.5 is not more than half sure; 0.51 is."""
    assert plans.problems(plan(step("a"), confidence=0.5)) == [
        "The plan's confidence is 0.5; it must be above 0.5, so make a plan you are more sure "
        "will reach the goal."]
    assert plans.problems(plan(step("a"), confidence=0.51)) == []


def test_several_problems_are_reported_together_in_a_stable_order() -> None:
    """Ids, self-dependencies, unknown ids, cycles, word counts, copies, then confidence."""
    messy = plan(
        step("a", "b", description="Book the cheapest refundable room in Lisbon"),
        step("b", "a", description="Book the cheapest refundable room in Lisbon today"),
        step("c", "c", "ghost", description="Pack"),
        step("c", description=DESCRIPTIONS["d"]),
        confidence=0.2,
    )
    found = plans.problems(messy)
    assert [message.split(";")[0] for message in found] == [
        'Step id "c" is used by 2 steps',
        'Step "c" depends on itself',
        'Step "c" depends on "ghost", which is not a step of the plan',
        'Steps "a", "b" depend on each other in a cycle',
        'The description of step "c" has 1 word',
        'Steps "a" and "b" have near-identical descriptions (word similarity 0.88)',
        "The plan's confidence is 0.2",
    ]
    assert plans.problems(messy) == found


def test_a_plan_built_without_steps_or_with_too_many_is_refused() -> None:
    """Plans made in code skip the schema's step limits, so problems() checks them too."""
    assert plans.problems(plan()) == ["The plan has no steps; give at least one."]
    many = [step(f"s{n}", description=f"{n} alpha beta gamma") for n in range(MAX_STEPS + 1)]
    assert plans.problems(plan(*many))[0] == "The plan has 13 steps; use at most 12."


# -- order, ready, coverage --

def test_order_breaks_ties_by_the_plans_own_order() -> None:
    """Steps ready together run as listed, not alphabetically; a step freed by one just done
    goes before later-listed ready steps and after earlier-listed ones."""
    assert plans.order(plan(step("c"), step("a"), step("b"))) == ["c", "a", "b"]
    assert plans.order(plan(step("x"), step("y", "x"), step("w"))) == ["x", "y", "w"]
    assert plans.order(plan(step("x"), step("w"), step("y", "x"))) == ["x", "w", "y"]


def test_ready_steps_follow_a_diamond_as_its_steps_are_done() -> None:
    """A first; then B and C together; D only once both B and C are done."""
    diamond = [("A", []), ("B", ["A"]), ("C", ["A"]), ("D", ["B", "C"])]
    assert plans.ready(diamond, set()) == ["A"]
    assert plans.ready(diamond, {"A"}) == ["B", "C"]
    assert plans.ready(diamond, {"A", "B"}) == ["C"]
    assert plans.ready(diamond, {"A", "B", "C"}) == ["D"]
    assert plans.ready(diamond, {"A", "B", "C", "D"}) == []


def test_coverage_is_the_share_of_steps_done_to_two_decimals() -> None:
    """One of three is 0.33, all is 1.0, and an empty plan has covered nothing."""
    assert plans.coverage(3, 1) == 0.33
    assert plans.coverage(3, 2) == 0.67
    assert plans.coverage(4, 4) == 1.0
    assert plans.coverage(0, 0) == 0.0


# -- parse --

def test_a_fenced_reply_with_prose_is_read_into_a_plan() -> None:
    """A Markdown fence and a sentence around the JSON do not stop the plan being read."""
    text = f"Here is the plan:\n```json\n{reply()}\n```\nGood luck!"
    assert plans.parse(text) == plan(step("a"), confidence=0.8)


def test_numeric_step_ids_become_strings_also_in_depends_on() -> None:
    """Ids 1 and 2.0 are read as "1" and "2", wherever they appear."""
    parsed = plans.parse(reply([
        {"id": 1, "description": DESCRIPTIONS["a"], "depends_on": []},
        {"id": 2.0, "description": DESCRIPTIONS["b"], "depends_on": [1]},
        {"id": "3", "description": DESCRIPTIONS["c"], "depends_on": [1, 2.0, "2"]},
    ]))
    assert [(s.id, s.depends_on) for s in parsed.steps] == [
        ("1", []), ("2", ["1"]), ("3", ["1", "2", "2"])]


def test_a_confidence_outside_zero_to_one_is_clamped() -> None:
    """7 for "0 to 1" becomes 1.0; -3 becomes 0.0."""
    assert plans.parse(reply(confidence=7)).confidence == 1.0
    assert plans.parse(reply(confidence=-3)).confidence == 0.0


def test_a_missing_or_null_depends_on_means_no_dependencies() -> None:
    """A step without depends_on, or with null, depends on nothing."""
    parsed = plans.parse(reply([
        {"id": "a", "description": DESCRIPTIONS["a"]},
        {"id": "b", "description": DESCRIPTIONS["b"], "depends_on": None},
    ]))
    assert [s.depends_on for s in parsed.steps] == [[], []]


@pytest.mark.parametrize(("text", "says"), [
    (reply([{"id": "a", "description": "x y z w", "depends_on": [], "why": "?"}]),
     "unknown field `why` - at `$.steps[0]`"),
    (reply(rationale="because"), "unknown field `rationale`"),
    (reply([]), "length >= 1 - at `$.steps`"),
    (reply([{"id": f"s{n}", "description": "x y z w"} for n in range(MAX_STEPS + 1)]),
     f"length <= {MAX_STEPS} - at `$.steps`"),
    (reply(confidence="high"), "Expected `float`, got `str` - at `$.confidence`"),
    (json.dumps({"steps": [{"id": "a", "description": "x y z w"}]}),
     "missing required field `confidence`"),
    ("I could not make a plan.", "the reply holds no JSON object"),
])
def test_a_reply_of_the_wrong_shape_is_refused_saying_what_is_wrong(text: str, says: str) -> None:
    """Unknown fields, zero or too many steps, wrong types and missing fields are refused with
    a StructuredOutputError naming the field."""
    with pytest.raises(StructuredOutputError) as caught:
        plans.parse(text)
    assert says in str(caught.value)


# -- properties --

@st.composite
def dags(draw: st.DrawFn) -> Plan:
    """A plan of 1 to 12 steps where each step depends only on steps listed before it."""
    count = draw(st.integers(1, MAX_STEPS))
    ids = [f"s{n}" for n in range(count)]
    listed = draw(st.permutations(ids))  # ids out of name order, so order() cannot sort them
    return plan(*(step(step_id, *draw(st.lists(st.sampled_from(listed[:n]), unique=True))
                       if n else ()) for n, step_id in enumerate(listed)))


@settings(derandomize=True, database=None, max_examples=200)
@given(dags())
def test_any_acyclic_plan_orders_every_step_after_its_dependencies(acyclic: Plan) -> None:
    """Each step appears once, after all it depends on, and no cycle is reported."""
    ordered = plans.order(acyclic)
    assert sorted(ordered) == sorted(s.id for s in acyclic.steps)
    at = {step_id: n for n, step_id in enumerate(ordered)}
    for s in acyclic.steps:
        assert all(at[dep] < at[s.id] for dep in s.depends_on)
    assert not any("cycle" in message for message in plans.problems(acyclic))


@settings(derandomize=True, database=None, max_examples=200)
@given(dags(), st.data())
def test_a_back_edge_in_any_plan_is_reported_as_a_cycle(acyclic: Plan, data: st.DataObject) -> None:
    """Making an earlier step depend on a later one that (now) depends on it is always caught,
    with both steps named."""
    steps = list(acyclic.steps)
    if len(steps) < 2:
        steps.append(step("extra"))
    first = data.draw(st.integers(0, len(steps) - 2))
    later = data.draw(st.integers(first + 1, len(steps) - 1))
    a, b = steps[first], steps[later]
    steps[later] = PlannedStep(b.id, b.description, [*b.depends_on, a.id])
    steps[first] = PlannedStep(a.id, a.description, [*a.depends_on, b.id])
    cyclic = plan(*steps)
    (message,) = [m for m in plans.problems(cyclic) if "cycle" in m]
    assert f'"{a.id}"' in message
    assert f'"{b.id}"' in message
    with pytest.raises(ValueError, match="cycle"):
        plans.order(cyclic)
