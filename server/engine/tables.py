"""What a table does besides placing: join an open table, the host's reissue and close, and play again.

Each is a command of the game's own (decided and appended by its LiveGame, so it takes its place in the
game's one order); what needs more than one command or a second game is put together here.

Play again: the next game is written first (with the ended game's credential hashes, so every token
carries over: any node hands a connection the token it came with), then `NextGame` naming it is appended
to the ended game. The append decides who won: a request that loses (another node's NextGame landed
first) deletes the game it wrote, which nobody was told of, and answers the winner's.
"""

from __future__ import annotations

import logging

from domain import (
    CloseSeat,
    Forbidden,
    GameNotOver,
    NextGameExists,
    PlayAgain,
    ReissueToken,
    SeatHasName,
    SeatIsClosed,
    TakeSeat,
    UnknownGame,
    next_game,
)
from server import auth
from server.engine.games import Games
from server.engine.owner import LiveGame, Outcome
from server.store import StoreError

log = logging.getLogger(__name__)

# Seats a join tries when others take them first (a table has at most four).
JOIN_ATTEMPTS = 4


class NoOpenSeat(Exception):
    """The open table has no open seat left."""


async def live(games: Games, game_id: str) -> LiveGame:
    """The game, as current as the store. Raises: UnknownGame, StoreError."""
    game = await games.get(game_id, refresh=True)
    if game is None:
        raise UnknownGame(f"no game {game_id!r}")
    return game


async def is_host(game: LiveGame, token: str | None) -> bool:
    """Whether `token` is the game's host token. Raises: StoreUnavailable."""
    return token is not None and auth.identify(token, await game.credentials()) == auth.HOST


async def join(games: Games, game_id: str, name: str) -> tuple[int, str]:
    """Take the lowest open seat of an open table for `name`: the seat and its new token (the seat's first
    token, held by whoever created the game, plays it no more).

    Raises: Forbidden (not an open table), NoOpenSeat, Rejected (a name the rules refuse), StoreError.
    """
    game = await live(games, game_id)
    if not game.state.open_table:
        raise Forbidden("this game is not an open table: its seats are taken from their own links")
    for _ in range(JOIN_ATTEMPTS):
        seats = game.state.open_seats()
        if not seats:
            break
        token = auth.new_token()
        command = TakeSeat(seat=seats[0], id=_id("join"), name=name, credential=auth.digest(token))
        try:
            await games.handle(game_id, command)
        except (SeatHasName, SeatIsClosed):
            await game.refresh()  # taken or closed meanwhile: the next open seat
            continue
        return seats[0], token
    raise NoOpenSeat("every seat of this table is taken")


async def reissue(games: Games, game_id: str, seat: int) -> str:
    """Give `seat` a new token; the new token. Raises: Rejected, StoreError."""
    token = auth.new_token()
    await games.handle(game_id, ReissueToken(target=seat, id=_id("host"), credential=auth.digest(token)))
    return token


async def close_seat(games: Games, game_id: str, seat: int) -> int:
    """Close an open seat before the first placement; the game's version after. Raises: Rejected,
    StoreError."""
    outcome = await games.handle(game_id, CloseSeat(target=seat, id=_id("host")))
    return outcome.version


async def play_again(
    games: Games, game_id: str, seat: int | None, command_id: str | None = None
) -> tuple[str, Outcome, bool]:
    """The next game of this ended one, started by this request or an earlier one: its id, the outcome
    that names it in the ended game (its NextGame envelope), and whether this request started it.

    Raises: GameNotOver, UnknownGame, Rejected, TooManyGames, StoreFull, StoreError.
    """
    game = await live(games, game_id)
    state = game.state
    if not state.ended:
        raise GameNotOver("the game has not ended: play again once it has")
    if state.next_game is not None:
        return state.next_game, await _next_game_outcome(games, game), False
    next_id = auth.new_game_id()
    credentials = dict(await game.credentials())  # the ended game's hashes: every token carries over
    await games.write_new(next_game(state, next_id), credentials)
    command = PlayAgain(seat=seat, id=command_id or _id("host"), game_id=next_id)
    try:
        outcome = await games.handle(game_id, command)
    except NextGameExists as exc:
        await _forget(games, next_id)
        return exc.game_id, await _next_game_outcome(games, game), False
    except BaseException:
        await _forget(games, next_id)
        raise
    named = game.next_game
    if named != next_id:  # the command id was accepted before, naming another game
        await _forget(games, next_id)
        return named or next_id, outcome, False
    return next_id, outcome, True


async def _next_game_outcome(games: Games, game: LiveGame) -> Outcome:
    """The ended game's NextGame envelope, as an outcome: always its last (no command follows it)."""
    version = game.version
    records = await games.history(game.game_id, version - 1, version)
    return Outcome(version, [record.data for record in records])


async def _forget(games: Games, game_id: str) -> None:
    """Delete a next game nobody was told of (another one was named first)."""
    try:
        await games.store.delete(game_id)
    except StoreError as exc:
        log.warning("an unnamed next game was left behind", extra={"game_id": game_id, "error": str(exc)})


def _id(kind: str) -> str:
    return f"{kind}-{auth.new_token()[:16]}"
