"""The board view of protocol.md, folded from a game's events incrementally or from scratch."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import msgspec
import pytest
from msgspec.structs import replace

import domain
from domain import (
    STANDARD,
    CreateGame,
    EndGame,
    GameEnded,
    InstrumentToken,
    PerformanceToken,
    Place,
    PlacementTakenBack,
    RepairToken,
    Score,
    Seated,
    TakeBack,
    Token,
    decide,
    evolve,
)
from projections import (
    Board,
    ChairSpaceView,
    PlayerView,
    RareSpaceView,
    View,
    apply,
    project,
    render,
    view_at,
)

ADA, BEN, CY = 0, 1, 2
_ids = itertools.count()
CLASSICAL = PerformanceToken(era="classical")
STRINGS = RepairToken(family="strings")
VIOLA = InstrumentToken(instrument="viola")
RARE_WINDS = InstrumentToken(instrument="rare_winds")


def events_of(*placements: tuple[int, Token, str], end: bool = False) -> list[domain.Event]:
    """The events of a game of Ada, Ben and Cy with these placements (and end_game when `end`)."""
    state = domain.Game()
    commands: list[domain.Command] = [CreateGame(game_id="g1", players=("Ada", "Ben", "Cy"))]
    commands += [Place(seat=s, id=f"c-{next(_ids)}", token=t, space=sp) for s, t, sp in placements]
    if end:
        commands.append(EndGame(seat=0, id="end"))
    log: list[domain.Event] = []
    for command in commands:
        new = decide(state, command)
        state = functools.reduce(evolve, new, state)
        log += new
    return log


GAME = events_of(
    (ADA, CLASSICAL, "viola"),
    (BEN, STRINGS, "viola"),
    (BEN, CLASSICAL, "viola"),
    (CY, RARE_WINDS, "rare_winds"),
    (ADA, RARE_WINDS, "rare_winds"),
    (CY, VIOLA, "viola"),
    (ADA, InstrumentToken(instrument="lute"), "lute"),
    end=True,
)


def test_a_new_game_view_has_every_space_of_the_layout_empty() -> None:
    view = project(events_of()).view
    assert list(view.spaces) == list(STANDARD.space_ids)
    for space in STANDARD.spaces:
        expected = RareSpaceView(chairs=()) if space.rare else ChairSpaceView(chair=None, below=())
        assert view.spaces[space.id] == expected


def test_a_new_game_view_names_the_players_and_scores_nothing() -> None:
    view = project(events_of()).view
    assert (view.game_id, view.version, view.ended) == ("g1", 1, False)
    assert view.players == (PlayerView(0, "Ada"), PlayerView(1, "Ben"), PlayerView(2, "Cy"))
    assert view.scores == tuple(Score(seat=s, chairs=(), prestige=0, resources={}) for s in range(3))


def test_the_view_encodes_standard_spaces_with_chair_and_below_and_rare_spaces_with_chairs() -> None:
    wire = msgspec.json.decode(msgspec.json.encode(view_at(GAME, 6)))
    assert set(wire) >= {"game_id", "version", "ended", "players", "spaces", "scores"}
    assert len(wire["spaces"]) == 14
    viola = wire["spaces"]["viola"]
    assert viola["chair"] == {"seat": BEN, "token": {"kind": "performance", "era": "classical"}}
    assert viola["below"] == [
        {"seat": BEN, "token": {"kind": "repair", "family": "strings"}},
        {"seat": ADA, "token": {"kind": "performance", "era": "classical"}},
    ]
    assert wire["spaces"]["lute"]["chair"] is None
    assert wire["spaces"]["lute"]["below"] == []
    rare = wire["spaces"]["rare_winds"]
    assert rare["chairs"] == [
        {"seat": CY, "token": {"kind": "instrument", "instrument": "rare_winds"}},
        {"seat": ADA, "token": {"kind": "instrument", "instrument": "rare_winds"}},
    ]
    assert "below" not in rare
    assert "chair" not in rare
    for space in STANDARD.spaces:
        keys = set(wire["spaces"][space.id])
        assert ("chairs" in keys) is space.rare
        assert ("below" in keys) is not space.rare


def test_the_view_shows_the_chair_and_the_tokens_below_the_line_oldest_first() -> None:
    view = project(GAME).view
    viola = view.spaces["viola"]
    assert isinstance(viola, ChairSpaceView)
    assert viola.chair == Seated(CY, VIOLA)
    assert viola.below == (Seated(BEN, STRINGS), Seated(ADA, CLASSICAL), Seated(BEN, CLASSICAL))


def test_scores_list_chairs_in_layout_order_with_a_rare_space_once_per_chair() -> None:
    events = events_of(
        (ADA, RARE_WINDS, "rare_winds"),
        (ADA, InstrumentToken(instrument="piano"), "piano"),
        (ADA, RARE_WINDS, "rare_winds"),
        (ADA, InstrumentToken(instrument="lute"), "lute"),
    )
    ada = project(events).view.scores[ADA]
    assert ada.chairs == ("lute", "piano", "rare_winds", "rare_winds")
    assert ada.prestige == 12
    assert ada.resources == {"money": 5, "inspiration": 3, "apprentice": 2, "metal": 1, "animal": 1}


def test_the_view_at_each_version_is_the_view_folded_up_to_that_event() -> None:
    board = Board()
    for version, event in enumerate(GAME, start=1):
        board = apply(board, event)
        assert board.version == version
        assert view_at(GAME, version) == board.view
        assert view_at(GAME, version).version == version


def test_the_view_at_version_0_is_the_empty_view() -> None:
    view = view_at(GAME, 0)
    assert view == View(game_id="", version=0, ended=False, players=(), spaces={}, scores=())


def test_the_view_at_a_version_past_the_end_is_the_latest_view() -> None:
    assert view_at(GAME, len(GAME) + 5) == project(GAME).view


def test_the_incremental_view_equals_the_view_rendered_from_scratch() -> None:
    board = project(GAME)
    assert board.view == render(board.game)
    assert board.game == functools.reduce(evolve, GAME, domain.Game())


def test_project_continues_from_a_given_board() -> None:
    half = project(GAME[:4])
    assert project(GAME[4:], half) == project(GAME)


def test_game_ended_sets_ended_and_keeps_the_scores() -> None:
    before = view_at(GAME, len(GAME) - 1)
    after = view_at(GAME, len(GAME))
    assert (before.ended, after.ended) == (False, True)
    assert after.scores == before.scores
    assert after.spaces == before.spaces
    assert after.version == before.version + 1


def test_game_ended_carries_the_scores_of_the_view_at_its_version() -> None:
    ended = GAME[-1]
    assert isinstance(ended, GameEnded)
    assert ended.scores == view_at(GAME, len(GAME)).scores
    assert ended.scores[CY].chairs == ("viola", "rare_winds")


def test_a_game_not_yet_created_renders_as_the_empty_view() -> None:
    assert render(domain.Game()) == View(game_id="", version=0, ended=False, players=(), spaces={}, scores=())
    assert Board().version == 0


@pytest.mark.parametrize("kind", [pytest.param("standard", id="standard"), pytest.param("rare", id="rare")])
def test_space_views_are_tagged_by_their_kind(kind: str) -> None:
    wire = msgspec.json.decode(msgspec.json.encode(project(GAME).view))
    tags = {space["kind"] for space in wire["spaces"].values()}
    assert kind in tags
    rare_ids = {s.id for s in STANDARD.spaces if s.rare}
    for space_id, space in wire["spaces"].items():
        assert (space["kind"] == "rare") is (space_id in rare_ids)


@pytest.mark.parametrize(
    "count", [pytest.param(count, id=f"after-{count}-placements") for count in range(1, 8)]
)
def test_after_a_take_back_the_view_is_the_view_before_the_placement(count: int) -> None:
    """Whichever placement of GAME is taken back (a claim, a steal, a token below, a rare chair)."""
    before = project(GAME[:count])
    placed = apply(before, GAME[count])
    seat = GAME[count].seat  # type: ignore[union-attr]
    (taken,) = decide(placed.game, TakeBack(seat=seat, id="t"))
    after = apply(placed, taken)
    assert after.view == replace(before.view, version=before.version + 2)
    assert after.view == render(after.game)
    # Spaces the placement did not touch are the same objects throughout.
    changed = [s for s in after.view.spaces if after.view.spaces[s] is not placed.view.spaces[s]]
    assert changed == [GAME[count].space]  # type: ignore[union-attr]
    assert project([*GAME[: count + 1], taken]) == after


def test_a_take_back_with_nothing_to_take_back_changes_no_space() -> None:
    placed = project(GAME[:3])
    board = apply(placed, decide(placed.game, TakeBack(seat=BEN, id="t"))[0])
    after = apply(board, PlacementTakenBack(seat=BEN, version=3))
    assert after.view == replace(board.view, version=5)
    assert all(after.view.spaces[s] is board.view.spaces[s] for s in board.view.spaces)


def test_apply_fails_loudly_on_something_that_is_not_an_event() -> None:
    stray: Any = object()
    with pytest.raises(AssertionError):
        apply(project(GAME[:1]), stray)
