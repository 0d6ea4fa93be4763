"""The board view of protocol.md, folded from a game's events, incrementally or from scratch.

A `Board` pairs the domain state with its view: each event evolves the state once, then only the parts of
the view it touched (one space, the scores) are rendered again, so a long game costs no more per event
than a new one.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Literal

import msgspec
from msgspec.structs import replace

from domain import (
    Event,
    Game,
    GameCreated,
    GameEnded,
    NextGame,
    PlacementTakenBack,
    Score,
    SeatClosed,
    Seated,
    SeatTaken,
    SeatTokenReissued,
    SpaceState,
    evolve,
    fold,
    scores,
)
from domain.messages import Amounts


class PlayerView(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """A seat and its player's name: None while the seat is open; `closed` (only when true) for a seat the
    host closed, which takes no part."""

    seat: int
    name: str | None
    closed: bool = False


class ChairSpaceView(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="standard"):
    """A standard or Violin space: its First Chair (None when empty) and the tokens below the line."""

    chair: Seated | None
    below: tuple[Seated, ...]


class RareSpaceView(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="rare"):
    """A rare space: its First Chairs, oldest first (unlimited)."""

    chairs: tuple[Seated, ...]


SpaceView = ChairSpaceView | RareSpaceView


class View(msgspec.Struct, frozen=True, gc=False):
    """What every client sees of a game at a version."""

    game_id: str
    version: int
    ended: bool
    players: tuple[PlayerView, ...]
    spaces: dict[str, SpaceView]
    scores: tuple[Score, ...]


EMPTY_VIEW = View(game_id="", version=0, ended=False, players=(), spaces={}, scores=())


class Board(msgspec.Struct, frozen=True, gc=False):
    """A game's domain state and its view, always of the same version."""

    game: Game = msgspec.field(default_factory=Game)
    view: View = EMPTY_VIEW

    @property
    def version(self) -> int:
        """The number of events folded in."""
        return self.game.version


def apply(board: Board, event: Event) -> Board:
    """The board after `event`, re-rendering only what the event touched."""
    game = evolve(board.game, event)
    view = board.view
    if isinstance(event, GameCreated):
        return Board(game, render(game))
    if isinstance(event, GameEnded):
        return Board(game, replace(view, version=game.version, ended=True))
    if isinstance(event, SeatTaken | SeatClosed):
        return Board(game, replace(view, version=game.version, players=_players(game)))
    if isinstance(event, SeatTokenReissued | NextGame):  # nothing on the board changes
        return Board(game, replace(view, version=game.version))
    if isinstance(event, PlacementTakenBack):
        # The state before the placement is back: the spaces whose state changed are rendered again.
        before = board.game.spaces
        spaces = {
            space_id: space if game.spaces[space_id] is before[space_id] else _rerender(game, space_id, space)
            for space_id, space in view.spaces.items()
        }
        return Board(game, replace(view, version=game.version, spaces=spaces, scores=scores(game)))
    # A placement: one space changed, and the scores.
    space = event.space
    kind: Literal["standard", "rare"] = (
        "rare" if isinstance(view.spaces[space], RareSpaceView) else "standard"
    )
    spaces = {**view.spaces, space: _render_space(game.spaces[space], kind)}
    if game.spaces[space].held == board.game.spaces[space].held:
        # No First Chair changed hands: chairs and prestige stand, only the placer's resources may move.
        ranked = _with_resources(view.scores, game.resources)
    else:
        ranked = scores(game)
    return Board(game, replace(view, version=game.version, spaces=spaces, scores=ranked))


def _with_resources(before: tuple[Score, ...], resources: tuple[Amounts, ...]) -> tuple[Score, ...]:
    return tuple(
        score if score.resources is amounts else replace(score, resources=amounts)
        for score, amounts in zip(before, resources, strict=True)
    )


def project(events: Iterable[Event], start: Board | None = None) -> Board:
    """Fold `events` onto `start` (a new board when None), rendering the view once at the end."""
    game = fold(events, None if start is None else start.game)
    return Board(game, render(game))


def render(game: Game) -> View:
    """The whole view of `game`, from scratch."""
    if game.layout is None:
        return replace(EMPTY_VIEW, version=game.version)
    return View(
        game_id=game.game_id,
        version=game.version,
        ended=game.ended,
        players=_players(game),
        spaces={
            space.id: _render_space(game.spaces[space.id], "rare" if space.rare else "standard")
            for space in game.layout.spaces
        },
        scores=scores(game),
    )


def _players(game: Game) -> tuple[PlayerView, ...]:
    return tuple(PlayerView(seat, name, seat in game.closed) for seat, name in enumerate(game.players))


def view_at(events: Iterable[Event], version: int) -> View:
    """The view as it was after event number `version` (GameCreated is version 1)."""
    return project(islice(events, max(0, version))).view


def _rerender(game: Game, space_id: str, space: SpaceView) -> SpaceView:
    return _render_space(game.spaces[space_id], "rare" if isinstance(space, RareSpaceView) else "standard")


def _render_space(held: SpaceState, kind: Literal["standard", "rare"]) -> SpaceView:
    if kind == "rare":
        return RareSpaceView(chairs=held.chairs)
    return ChairSpaceView(chair=held.chair, below=held.below)
