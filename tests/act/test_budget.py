"""The prompt budget: how many tokens a request is thought to hold, and whether it fits."""

from __future__ import annotations

import pytest

from chalie.act.budget import PromptBudget, line_tokens, raw_estimate, shed
from chalie.llm.types import ChatRequest, Message, ToolSpec, Usage
from chalie.values.memory import MemoryLine, memory_text

MEMORY = ToolSpec("memory", "facts", {"type": "object"})


def request_of(tokens: int) -> ChatRequest:
    """A request whose plain estimate is exactly `tokens` (4 characters a token, "[]" for tools)."""
    return ChatRequest("s" * (4 * tokens - 2), (Message("user", ""),))


def test_estimate_grows_with_system_message_and_tools() -> None:
    """The system prompt, the message and every tool spec all count toward the estimate."""
    empty = ChatRequest("", (Message("user", ""),))
    texts = ChatRequest("a" * 40, (Message("user", "b" * 40),))
    with_tool = ChatRequest("a" * 40, (Message("user", "b" * 40),), (MEMORY,))
    assert [raw_estimate(r) for r in (empty, texts, with_tool)] == [1, 21, 30]
    assert raw_estimate(request_of(100)) == 100


@pytest.mark.parametrize(
    ("window", "threshold", "limit"),
    [(8192, 0.8, 6553), (1000, 1.0, 1000), (4096, 0.5, 2048)],
)
def test_limit_is_the_threshold_share_of_the_window(
    window: int, threshold: float, limit: int
) -> None:
    """The limit is the context window times the threshold, rounded down."""
    assert PromptBudget(window, threshold).limit == limit


def test_a_prompt_exactly_at_the_limit_fits_and_one_more_token_does_not() -> None:
    """fits() is true up to and including the limit."""
    budget = PromptBudget(100, 1.0)
    assert (budget.tokens(request_of(100)), budget.fits(request_of(100))) == (100, True)
    assert (budget.tokens(request_of(101)), budget.fits(request_of(101))) == (101, False)


def test_reported_prompt_tokens_scale_later_estimates() -> None:
    """After the provider counted 150 tokens for a 100-token estimate, estimates are 1.5 times."""
    budget = PromptBudget(1000, 0.2)
    budget.calibrate(request_of(100), Usage(150, 5, 155))
    assert budget.tokens(request_of(100)) == 150
    assert budget.tokens(request_of(200)) == 300
    assert budget.fits(request_of(120)) is True
    assert budget.fits(request_of(140)) is False


@pytest.mark.parametrize(("prompt_tokens", "scaled"), [(1000, 400), (10, 25)],
                         ids=["capped-at-4", "floored-at-a-quarter"])
def test_calibration_ratio_is_clamped(prompt_tokens: int, scaled: int) -> None:
    """A wild provider count scales estimates by at most 4 and at least a quarter."""
    budget = PromptBudget(1000, 1.0)
    budget.calibrate(request_of(100), Usage(prompt_tokens, 0, prompt_tokens))
    assert budget.tokens(request_of(100)) == scaled


@pytest.mark.parametrize(
    "usage",
    [Usage(prompt_tokens=300, total_tokens=300, estimated=True), Usage(0, 20, 20)],
    ids=["estimated", "no-prompt-tokens"],
)
def test_usage_without_a_real_prompt_count_does_not_calibrate(usage: Usage) -> None:
    """An estimated usage or one with zero prompt tokens leaves the plain estimate in use."""
    budget = PromptBudget(1000, 1.0)
    budget.calibrate(request_of(100), usage)
    assert budget.tokens(request_of(100)) == 100


def test_excess_is_what_must_go_for_a_request_to_fit() -> None:
    """excess() counts plain estimated tokens (before the learned ratio) over the limit."""
    budget = PromptBudget(100, 1.0)
    assert [budget.excess(request_of(n)) for n in (90, 100, 130)] == [0, 0, 30]
    budget.calibrate(request_of(100), Usage(200, 5, 205))  # real tokens are twice the estimate
    assert budget.excess(request_of(60)) == 10
    assert budget.fits(request_of(50))
    assert not budget.fits(request_of(51))


def lines(*scores: float, best: int = 0) -> tuple[MemoryLine, ...]:
    """Memory lines with these scores, the `best` highest of them marked best."""
    top = sorted(scores, reverse=True)[:best]
    return tuple(MemoryLine(f"On 2026-01-0{1 + n // 2}:", f"- line {n} " + "x" * 30, s, s in top)
                 for n, s in enumerate(scores))


def test_shed_drops_the_last_lines_and_the_best_ones_only_at_the_end() -> None:
    """Lines go from the end of the section until the tokens asked for are free, the best only
    when no other is left (the least relevant of them first); the rest keep their order; days'
    headings go with their last line."""
    recalled = lines(0.9, 0.1, 0.5, 0.3, 0.7, best=2)  # each 39 characters and its break
    assert line_tokens(recalled) == 50
    assert line_tokens(recalled[:1]) == 10
    assert shed(recalled, 0) == recalled
    assert shed(recalled, 1) == (recalled[0], recalled[1], recalled[2], recalled[4])
    assert shed(recalled, 11) == (recalled[0], recalled[1], recalled[4])
    assert shed(recalled, 21) == (recalled[0], recalled[4])
    assert shed(recalled, 31) == (recalled[0],)
    assert shed(recalled, 500) == ()
    assert shed(lines(0.9, 0.1, 0.5, 0.3, 0.7), 11) == lines(0.9, 0.1, 0.5)
    assert memory_text(shed(recalled, 11)) == "\n".join([
        "On 2026-01-01:", recalled[0].text, recalled[1].text, "On 2026-01-03:", recalled[4].text])
