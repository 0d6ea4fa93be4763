"""End of game (rules.md §7): chairs score their prestige, every rare chair counts, ties share a rank."""

from __future__ import annotations

import functools
import itertools
from importlib.resources import files

import pytest

import domain
from domain import (
    STANDARD,
    CreateGame,
    EndGame,
    GameEnded,
    InstrumentToken,
    PerformanceToken,
    Place,
    Rank,
    RepairToken,
    Score,
    Token,
    decide,
    evolve,
    parse_layout,
    ranking,
    scores,
)

ADA, BEN, CY = 0, 1, 2
STANDARD_TOML = files("domain.layouts").joinpath("standard.toml").read_text()
_ids = itertools.count()


def play(
    *placements: tuple[int, Token, str],
    players: int = 3,
    layouts: dict[str, domain.Layout] | None = None,
    layout: str = "standard",
) -> domain.Game:
    names = ("Ada", "Ben", "Cy", "Di")[:players]
    create = CreateGame(game_id="g", players=names, layout=layout)
    state = domain.Game()
    commands: list[domain.Command] = [create]
    commands += [Place(seat=s, id=f"c-{next(_ids)}", token=t, space=sp) for s, t, sp in placements]
    for command in commands:
        events = decide(state, command) if layouts is None else decide(state, command, layouts)
        state = functools.reduce(evolve, events, state)
    return state


def inst(name: str) -> InstrumentToken:
    return InstrumentToken(instrument=name)


def final(state: domain.Game) -> GameEnded:
    (event,) = decide(state, EndGame(seat=0, id="end"))
    assert isinstance(event, GameEnded)
    return event


def test_a_game_with_no_placements_scores_zero_for_everyone() -> None:
    event = final(play())
    assert event.scores == tuple(Score(seat=s, chairs=(), prestige=0, resources={}) for s in range(3))
    assert event.ranking == tuple(Rank(seat=s, rank=1, prestige=0) for s in range(3))


def test_each_first_chair_scores_3_prestige_and_below_the_line_scores_nothing() -> None:
    state = play(
        (ADA, PerformanceToken(era="classical"), "viola"),
        (BEN, RepairToken(family="strings"), "viola"),
        (ADA, inst("lute"), "lute"),
    )
    ada, ben, cy = final(state).scores
    assert ada == Score(seat=ADA, chairs=("lute", "viola"), prestige=6, resources={"money": 6, "animal": 1})
    assert ben == Score(seat=BEN, chairs=(), prestige=0, resources={"money": 2})
    assert cy == Score(seat=CY, chairs=(), prestige=0, resources={})


def test_every_rare_chair_counts_once_each() -> None:
    state = play(
        (ADA, inst("rare_winds"), "rare_winds"),
        (ADA, inst("rare_winds"), "rare_winds"),
        (BEN, inst("rare_winds"), "rare_winds"),
        (ADA, inst("rare_percussion_keyboards"), "rare_percussion_keyboards"),
    )
    ada, ben, _ = final(state).scores
    assert ada.chairs == ("rare_winds", "rare_winds", "rare_percussion_keyboards")
    assert ada.prestige == 9
    assert ben.chairs == ("rare_winds",)
    assert ben.prestige == 3


def test_chairs_are_listed_in_layout_order_not_placement_order() -> None:
    state = play(
        (ADA, inst("piano"), "piano"),
        (ADA, inst("rare_winds"), "rare_winds"),
        (ADA, inst("lute"), "lute"),
        (ADA, inst("violin"), "violin_cr"),
        players=1,
    )
    assert final(state).scores[0].chairs == ("lute", "violin_cr", "piano", "rare_winds")


def test_ties_are_reported_not_broken_and_the_next_rank_skips() -> None:
    state = play(
        (CY, inst("lute"), "lute"),
        (CY, inst("viola"), "viola"),
        (ADA, inst("oboe"), "oboe"),
        (ADA, inst("flute"), "flute"),
        (BEN, inst("cello"), "cello"),
    )
    assert final(state).ranking == (
        Rank(seat=ADA, rank=1, prestige=6),
        Rank(seat=CY, rank=1, prestige=6),
        Rank(seat=BEN, rank=3, prestige=3),
    )


def test_a_four_way_ranking_skips_after_each_shared_rank() -> None:
    final_scores = tuple(
        Score(seat=seat, chairs=(), prestige=prestige, resources={})
        for seat, prestige in enumerate((3, 9, 3, 0))
    )
    assert ranking(final_scores) == (
        Rank(seat=1, rank=1, prestige=9),
        Rank(seat=0, rank=2, prestige=3),
        Rank(seat=2, rank=2, prestige=3),
        Rank(seat=3, rank=4, prestige=0),
    )


def test_the_game_ended_scores_are_the_scores_of_the_state() -> None:
    state = play((ADA, inst("viola"), "viola"), (BEN, PerformanceToken(era="baroque"), "oboe"))
    event = final(state)
    assert event.scores == scores(state)
    assert event.ranking == ranking(scores(state))
    assert evolve(state, event).ended is True


def test_prestige_per_chair_comes_from_the_layout() -> None:
    text = STANDARD_TOML.replace(
        "bonus = { money = 4 }\nprestige = 3", "bonus = { money = 4 }\nprestige = 5", 1
    )
    text = text.replace('name = "standard"', 'name = "heavy"', 1)
    heavy = parse_layout(text)
    state = play(
        (ADA, inst("viola"), "viola"),
        (BEN, inst("lute"), "lute"),
        layouts={"heavy": heavy},
        layout="heavy",
    )
    ada, ben, _ = final(state).scores
    assert (ada.prestige, ben.prestige) == (5, 3)


@pytest.mark.parametrize(
    ("prestiges", "ranks"),
    [
        pytest.param((6, 6, 3), (1, 1, 3), id="two-share-first"),
        pytest.param((3, 6, 6), (3, 1, 1), id="two-share-first-in-later-seats"),
        pytest.param((0, 0, 0), (1, 1, 1), id="everyone-shares-first"),
        pytest.param((9, 6, 3), (1, 2, 3), id="no-ties"),
        pytest.param((9, 3, 3), (1, 2, 2), id="two-share-second"),
    ],
)
def test_rank_is_one_plus_the_number_of_seats_with_more_prestige(
    prestiges: tuple[int, ...], ranks: tuple[int, ...]
) -> None:
    final_scores = tuple(Score(seat=s, chairs=(), prestige=p, resources={}) for s, p in enumerate(prestiges))
    result = ranking(final_scores)
    assert {r.seat: r.rank for r in result} == dict(enumerate(ranks))
    assert [r.prestige for r in result] == sorted(prestiges, reverse=True)
    # Within a shared rank, seats are in seat order.
    assert [(r.rank, r.seat) for r in result] == sorted((r.rank, r.seat) for r in result)


def test_the_standard_layout_gives_3_prestige_to_every_first_chair() -> None:
    assert {space.prestige for space in STANDARD.spaces} == {3}
