"""The board view and its deltas with open, taken and closed seats, reissued tokens and a next game."""

from __future__ import annotations

import functools

import msgspec

from domain import (
    CloseSeat,
    CreateGame,
    EndGame,
    Event,
    Game,
    PlayAgain,
    ReissueToken,
    TakeSeat,
    decide,
    evolve,
)
from domain.messages import Command
from projections import Board, PlayerView, apply, project, render, view_delta


def _events(*commands: Command) -> list[Event]:
    state, events = Game(), []
    for command in commands:
        new = decide(state, command)
        state = functools.reduce(evolve, new, state)
        events += new
    return events


EVENTS = _events(
    CreateGame(game_id="g", players=("Ada", None, None), open=True),
    TakeSeat(seat=1, id="t", name="Ben"),
    CloseSeat(target=2, id="c"),
    ReissueToken(target=1, id="r", credential="b" * 64),
    EndGame(seat=0, id="e"),
    PlayAgain(seat=0, id="p", game_id="g2"),
)


def test_an_open_seat_shows_a_null_name_and_a_closed_one_closed_true() -> None:
    board = project(EVENTS[:1])
    assert board.view.players == (PlayerView(0, "Ada"), PlayerView(1, None), PlayerView(2, None))
    encoded = msgspec.json.encode(project(EVENTS[:3]).view.players)
    assert encoded == (
        b'[{"seat":0,"name":"Ada"},{"seat":1,"name":"Ben"},{"seat":2,"name":null,"closed":true}]'
    )


def test_applying_seat_events_one_by_one_equals_rendering_from_scratch() -> None:
    board = Board()
    for index, event in enumerate(EVENTS):
        board = apply(board, event)
        assert board.view == render(project(EVENTS[: index + 1]).game)
    assert board.version == len(EVENTS)


def test_a_delta_carries_the_players_only_when_a_seat_changed() -> None:
    boards = [Board()]
    for event in EVENTS:
        boards.append(apply(boards[-1], event))
    taken = view_delta(boards[1].view, boards[2].view)
    assert taken.players == boards[2].view.players
    assert b'"players"' in msgspec.json.encode(taken)
    reissued = view_delta(boards[3].view, boards[4].view)
    assert reissued.players is None
    assert b'"players"' not in msgspec.json.encode(reissued)
    assert reissued.version == 4
