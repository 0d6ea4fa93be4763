"""Every `match` over a union ends in assert_never: a value outside the union fails loudly, never silently."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import domain
from domain import STANDARD, CreateGame, decide, describe, evolve
from domain.rules import may_go


class NotAToken:
    """Something a caller might pass by mistake where a token is expected."""


def _created() -> domain.Game:
    return functools.reduce(
        evolve, decide(domain.Game(), CreateGame(game_id="g", players=("Ada",))), domain.Game()
    )


def test_decide_fails_loudly_on_something_that_is_not_a_command() -> None:
    stray: Any = object()
    with pytest.raises(AssertionError):
        decide(_created(), stray)


def test_evolve_fails_loudly_on_something_that_is_not_an_event() -> None:
    stray: Any = object()
    with pytest.raises(AssertionError):
        evolve(_created(), stray)


def test_the_legality_check_fails_loudly_on_something_that_is_not_a_token() -> None:
    stray: Any = NotAToken()
    with pytest.raises(AssertionError):
        may_go(STANDARD.spaces[0], stray)


def test_describe_fails_loudly_on_something_that_is_not_a_token() -> None:
    stray: Any = NotAToken()
    with pytest.raises(AssertionError):
        describe(stray)


@pytest.mark.parametrize(
    ("token", "words"),
    [
        pytest.param(
            domain.InstrumentToken(instrument="rare_percussion_keyboards"),
            "a Rare Percussion & Keyboards instrument",
            id="instrument",
        ),
        pytest.param(domain.PerformanceToken(era="baroque"), "a Baroque performance", id="performance"),
        pytest.param(domain.RepairToken(family="winds"), "a Winds repair", id="repair"),
    ],
)
def test_describe_puts_a_token_in_words(token: domain.Token, words: str) -> None:
    assert describe(token) == words
