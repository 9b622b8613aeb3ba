"""The situation model's open loops: what the person said they still need or plan to do, with
whatever adverbs they put in the way, until they say it is done."""

from __future__ import annotations

import pytest

from chalie.cognition.situation import Situation, update


def loops(*texts: str) -> list[str]:
    """The open loops after the person said `texts`, in order."""
    situation = Situation()
    for text in texts:
        situation = update(situation, text, focus=None)
    return situation.open_loops


@pytest.mark.parametrize(("text", "loop"), [
    ("I still need to call the plumber about the leak under the sink",
     "call the plumber about the leak under the sink"),
    ("I still have to renew my passport before June", "renew my passport before June"),
    ("I need to call the plumber about the leak", "call the plumber about the leak"),
    ("I really need to finish my tax return", "finish my tax return"),
    ("I still haven't booked the hotel for Lisbon", "haven't booked the hotel for Lisbon"),
    ("I also have to pick up the kids at five", "pick up the kids at five"),
    ("I definitely must email the landlord", "email the landlord"),
    ("I'll eventually need to replace the boiler", "replace the boiler"),
    ("I\u2019ll eventually need to replace the roof", "replace the roof"),
    ("We seriously need to talk about the budget", "talk about the budget"),
    ("I'm still going to paint the fence", "paint the fence"),
    ("I've also got to buy a present for Sam", "buy a present for Sam"),
    ("I'd better water the plants", "water the plants"),
    ("I should probably call my mum", "call my mum"),
    ("We all need to sign the form", "sign the form"),
    ("I'll call the dentist tomorrow", "call the dentist tomorrow"),
    ("Remind me to buy milk", "buy milk"),
])
def test_an_open_loop_is_heard_through_any_adverb(text: str, loop: str) -> None:
    """"I still need to call the plumber" is an open loop, as "I need to call the plumber" is;
    the loop is what is to be done, without the adverbs."""
    assert loops(text) == [loop]


@pytest.mark.parametrize("text", [
    "I still love my dog",
    "I really like pizza",
    "We still have two cats",
    "I also think the movie was too long",
    "I still remember the summer in Lisbon",
    "I don't need to call the plumber anymore",
    "I no longer need to renew my passport",
    "I will never need to learn Cobol",
    "I'll not go there again",
    "I hardly need to mention it",
    "I haven't seen that film",
    "I finally called the plumber",
])
def test_what_is_not_left_to_do_is_no_open_loop(text: str) -> None:
    """An adverb alone makes no loop, and neither does a need denied."""
    assert loops(text) == []


def test_a_loop_said_with_an_adverb_closes_when_it_is_done() -> None:
    """The plumber and the hotel stay open until the person says they called and booked."""
    said = ("I still need to call the plumber about the leak",
            "I still haven't booked the hotel for Lisbon")
    assert loops(*said) == ["call the plumber about the leak",
                            "haven't booked the hotel for Lisbon"]
    assert loops(*said, "Done: I called the plumber, he comes about the leak on Monday") == [
        "haven't booked the hotel for Lisbon"]
    assert loops(*said, "I booked the hotel in Lisbon at last") == [
        "call the plumber about the leak"]


def test_a_loop_said_again_with_an_adverb_is_kept_once() -> None:
    """"I still need to call the plumber" after "I need to call the plumber" is the same loop."""
    assert loops("I need to call the plumber", "I still need to call the plumber") == [
        "call the plumber"]
