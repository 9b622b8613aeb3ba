"""`chalie doctor`'s model checks: every job's model and its fallback, each probed on its own.

Each endpoint (a configured model) is asked, with a short timeout per request:

(a) reachable, and serving its model: `check_endpoint`, the model list (costs no tokens);
(b) a native tool round trip: prompts/doctor_tool.md with one tool, `echo`; the model must call
    it, and, given the call and its result back, answer in text;
(c) structured output: prompts/doctor_structured.md with a two-field schema; the answer must
    decode as that schema.

The probes go to the endpoint's own provider, not through the Job: a working fallback would
otherwise hide a broken model. What a turn would see still applies: every answer is normalised
(chalie/llm/repair.py), and the provider of a `tools = false` endpoint is the PromptedTools that
build_models wrapped it in. When (a) fails, (b) and (c) are not tried. A script provider is only
loaded: a probe would use up the steps of its script.

The results come back as lines for chalie/doctor.py to print. A model line is FAIL only when the
primary job has no working model (the person's turns could not be answered); anything else
wrong with a model is a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import msgspec

from chalie.config import LlmConfig, LlmOverride
from chalie.errors import (
    ChalieError,
    ConfigError,
    LlmError,
    LlmUnavailable,
    StructuredOutputError,
)
from chalie.llm.factory import build_models, build_provider, check_endpoint
from chalie.llm.repair import normalise
from chalie.llm.route import Endpoint, Job, advice
from chalie.llm.structured import decode_structured, structured
from chalie.llm.types import (
    ChatRequest,
    ChatResponse,
    LlmProvider,
    Message,
    TextSink,
    ToolSpec,
)
from chalie.prompts import Prompts

PROBE_TIMEOUT_S = 60.0  # the most one probe request may take, whatever request_timeout_s says
WORD = "marmalade"  # what the probes ask the model to echo
NUMBER = 7
ECHO = ToolSpec(
    name="echo",
    description="",  # what it is for is in prompts/doctor_tool.md: prompt text lives in files
    parameters={"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]},
)
_QUOTED = 80  # characters of an unexpected answer quoted in a line
_SETTINGS = tuple(LlmOverride.__struct_fields__)  # the keys an endpoint's settings come from


class _Probe(msgspec.Struct, frozen=True):
    word: str
    number: int


@dataclass(frozen=True)
class Line:
    """One printed line: `level` is "ok", "warn" or "FAIL"; `problem` is empty for ok."""

    level: str
    what: str
    problem: str = ""


@dataclass
class _Probed:
    """What one endpoint's probes found."""

    problem: str | None = None  # (a): why it cannot be used; None when it can
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # (b) and (c)
    skipped: str = ""  # why (b) and (c) were not tried, for a usable endpoint


class _Unbuilt:
    """The provider of an endpoint whose provider could not be built (a script file that is
    not there, a llamacpp model without its extra): build_models needs one to carry on."""

    def __init__(self, error: ChalieError) -> None:
        self._error = error

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        raise LlmUnavailable(str(self._error), recoverable=False)

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        raise LlmUnavailable(str(self._error), recoverable=False)

    def close(self) -> None:
        pass


def check_models(llm: LlmConfig, prompts: Prompts) -> Iterator[Line]:
    """The lines of every job's endpoints, a job at a time (its fallback decides how bad a
    broken model is). Endpoints with the same settings and keys are probed once."""
    unbuilt: dict[LlmConfig, ChalieError] = {}

    def build(settings: LlmConfig) -> LlmProvider:
        try:
            return build_provider(settings)
        except (ConfigError, LlmError) as e:
            unbuilt[settings] = e
            return _Unbuilt(e)

    models = build_models(llm, prompts, build=build)
    seen: dict[tuple[LlmConfig, tuple[str, ...]], tuple[_Probed, str]] = {}
    try:
        for job in models.jobs:
            results = []
            for endpoint in job.endpoints:
                same = (endpoint.settings, tuple(endpoint.key(f) for f in _SETTINGS))
                first = same not in seen
                if first:
                    seen[same] = (_probe(endpoint, prompts, unbuilt.get(endpoint.settings)),
                                  _role(job, endpoint))
                probed, role = seen[same]
                results.append((endpoint, probed, None if first else role))
            working = [e for e, probed, _ in results if probed.problem is None]
            for endpoint, probed, shown_as in results:
                yield from _lines(job, endpoint, probed, working, shown_as)
    finally:
        models.close()


# --- probing ----------------------------------------------------------------------------------

def _probe(endpoint: Endpoint, prompts: Prompts, build_error: ChalieError | None) -> _Probed:
    if build_error is not None:
        return _Probed(problem=_build_problem(endpoint, build_error))
    timeout_s = min(endpoint.settings.request_timeout_s, PROBE_TIMEOUT_S)
    problem = check_endpoint(endpoint, timeout_s)
    if problem is not None:
        return _Probed(problem=problem)
    if endpoint.kind == "script":
        return _Probed(passed=["loads"], skipped="script provider: probes skipped")
    probed = _Probed(passed=["reachable"])
    for name, probe in (("tool call", _tool_round_trip),
                        ("structured output", _structured_output)):
        found = probe(endpoint, prompts, timeout_s)
        if found is None:
            probed.passed.append(name)
        else:
            probed.problems.append(found)
    return probed


def _build_problem(endpoint: Endpoint, error: ChalieError) -> str:
    if isinstance(error, LlmError):
        return advice(endpoint, error)
    if isinstance(error, ConfigError):
        return f"{error.problem}; set {endpoint.key(error.key.rsplit('.', 1)[-1])}"
    return str(error)


def _discard(text: str) -> None:
    """The text sink of a probe: a turn streams when it can, so the probe does too."""


def _tool_round_trip(endpoint: Endpoint, prompts: Prompts, timeout_s: float) -> str | None:
    """(b): None when the model called echo and then, given its result, answered in text."""
    provider, hint = endpoint.provider, _tools_hint(endpoint)
    ask = Message("user", prompts.render("doctor_tool", word=WORD))
    first = ChatRequest(system="", messages=(ask,), tools=(ECHO,))
    try:
        answer = normalise(provider.complete(first, timeout_s=timeout_s, on_text=_discard), first)
    except LlmError as e:
        return f"the tool-call request failed: {advice(endpoint, e)}"
    call = next((c for c in answer.tool_calls if c.name == ECHO.name), None)
    if call is None:
        did = (f"called {', '.join(c.name for c in answer.tool_calls)}" if answer.tool_calls
               else f"answered with text instead ({_quoted(answer.text)})")
        return f"asked to call the tool echo, it {did}; {hint}"
    if call.args is None:
        return f"its call of echo had unusable arguments ({call.args_error}); {hint}"
    result = str(call.args.get("text", ""))  # what an echo tool answers: its text
    second = ChatRequest(system="", tools=(ECHO,), messages=(
        ask, Message("assistant", answer.text, tool_calls=(call,)),
        Message("tool", result, tool_call_id=call.call_id)))
    try:
        reply = normalise(provider.complete(second, timeout_s=timeout_s, on_text=_discard),
                          second)
    except LlmError as e:
        return f"given the tool's result, the request failed: {advice(endpoint, e)}; {hint}"
    if not reply.text.strip():
        did = "called a tool again" if reply.tool_calls else "answered with no text"
        return f"given the tool's result, it {did} instead of answering; {hint}"
    return None


def _structured_output(endpoint: Endpoint, prompts: Prompts, timeout_s: float) -> str | None:
    """(c): None when the answer decoded as the schema asked for."""
    request = ChatRequest(
        system="",
        messages=(Message("user", prompts.render("doctor_structured", word=WORD,
                                                 number=str(NUMBER))),),
        response_format=structured("doctor_probe", _Probe))
    try:
        answer = normalise(endpoint.provider.complete(request, timeout_s=timeout_s), request)
    except LlmError as e:
        return f"the structured-output request failed: {advice(endpoint, e)}"
    try:
        decode_structured(answer.text, _Probe)
    except StructuredOutputError as e:
        return (f"its answer was not JSON of the schema asked for ({e}); episode encoding and "
                f"goal plans need that: set {endpoint.key('model')} to a model that can follow "
                "a JSON schema")
    return None


def _tools_hint(endpoint: Endpoint) -> str:
    key = endpoint.key("tools")
    if endpoint.settings.tools:
        return f"if the model has no native tool calling, set {key} = false"
    return (f"its tools were described in the prompt ({key} = false), and a model this small "
            f"may not follow that: set {endpoint.key('model')} to a larger one")


def _quoted(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _QUOTED else flat[:_QUOTED] + "...")


# --- lines ------------------------------------------------------------------------------------

def _lines(job: Job, endpoint: Endpoint, probed: _Probed, working: list[Endpoint],
           shown_as: str | None) -> Iterator[Line]:
    """The endpoint's lines; `shown_as` names the endpoint whose lines, above, were for the
    same model (the light job has the primary's settings unless it names its own)."""
    what = _what(job, endpoint)
    if probed.problem is not None:
        # advice() starts "openai at <address> ...", which the line's `what` has said already.
        problem = probed.problem.removeprefix(f"{endpoint.kind} at {endpoint.address} ")
        yield _unusable(job, endpoint, what, problem, working)
        return
    done = ", ".join(probed.passed)
    if probed.skipped:
        yield Line("ok", f"{what} ({done}; {probed.skipped})")
    elif not probed.problems:
        yield Line("ok", f"{what} ({done})")
    elif shown_as is not None:
        yield Line("warn", f"{what} ({done})", f"the same model as the {shown_as}: see its "
                   "warnings above")
    else:
        for problem in probed.problems:
            yield Line("warn", f"{what} ({done})", problem)


def _unusable(job: Job, endpoint: Endpoint, what: str, problem: str,
              working: list[Endpoint]) -> Line:
    """A model that cannot be used: how bad that is depends on the job and its other model."""
    if working:
        other = f"the {job.name} model" if endpoint.fallback else "its fallback"
        return Line("warn", what, f"{problem}; {other} answers meanwhile")
    if job.name == "primary":
        return Line("FAIL", what, problem)
    return Line("warn", what, f"{problem}; until it answers, the {job.name} job's work "
                "(episode encoding, compaction, the DMN, goal plans) fails")


def _role(job: Job, endpoint: Endpoint) -> str:
    return f"{job.name} fallback model" if endpoint.fallback else f"{job.name} model"


def _what(job: Job, endpoint: Endpoint) -> str:
    role = _role(job, endpoint)
    if endpoint.kind == "llamacpp":
        return f"{role}: llamacpp {endpoint.model}"
    if endpoint.kind == "script":
        return f"{role}: script {endpoint.address}"
    return f"{role}: {endpoint.kind} {endpoint.model} at {endpoint.address}"


def live_checks(llm: LlmConfig, prompts: Prompts, timeout_s: float = 10.0,
                ) -> tuple[list[dict[str, str]], list[str] | None]:
    """The checks above for an [llm] as it would be (POST /api/settings/test, `chalie setup`):
    their lines as JSON, and the models the primary model's server offers (None when it does
    not say: unreachable, or no model list)."""
    lines = [{"level": line.level, "what": line.what, "problem": line.problem}
             for line in check_models(llm, prompts)]
    primary = llm.job("primary") or llm
    try:
        provider = build_provider(primary)
    except (ConfigError, LlmError):
        return lines, None
    try:
        return lines, sorted(provider.models(timeout_s=timeout_s))
    except LlmError:
        return lines, None
    finally:
        provider.close()
