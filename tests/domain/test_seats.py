"""Open seats, closed seats, reissued tokens and the next game (issue 40): every rule and every refusal."""

from __future__ import annotations

import functools
import itertools

import msgspec
import pytest

import domain
from domain import (
    BadName,
    BadRequest,
    CloseSeat,
    CreateGame,
    EndGame,
    Forbidden,
    Game,
    GameCreated,
    GameEnded,
    GameNotOver,
    GameOver,
    GameStarted,
    NextGame,
    NextGameExists,
    PerformanceToken,
    Place,
    PlayAgain,
    ReissueToken,
    SeatClosed,
    SeatHasName,
    SeatIsClosed,
    SeatTaken,
    SeatTokenReissued,
    TableNotFull,
    TakeBack,
    TakeSeat,
    decide,
    evolve,
    fold,
    next_game,
    ranking,
)
from domain.messages import Command, Event

_ids = itertools.count()
HASH = "a" * 64
CLASSICAL = PerformanceToken(era="classical")


def cid() -> str:
    return f"c-{next(_ids)}"


def run(state: Game, *commands: Command) -> Game:
    for command in commands:
        state = functools.reduce(evolve, decide(state, command), state)
    return state


def start(*players: str | None, open_table: bool = False) -> Game:
    return run(Game(), CreateGame(game_id="g", players=players, open=open_table))


def take(seat: int, name: str) -> TakeSeat:
    return TakeSeat(seat=seat, id=cid(), name=name)


def place(seat: int, space: str = "viola") -> Place:
    return Place(seat=seat, id=cid(), token=CLASSICAL, space=space)


def close(seat: int) -> CloseSeat:
    return CloseSeat(target=seat, id=cid())


def end(seat: int = 0) -> EndGame:
    return EndGame(seat=seat, id=cid())


# Creating a game with open seats ----------------------------------------------------------------------


def test_a_game_is_created_with_open_seats_and_open_table() -> None:
    state = start("Ada", None, None, open_table=True)
    assert state.players == ("Ada", None, None)
    assert state.open_table
    assert state.open_seats() == (1, 2)
    assert not state.full


def test_an_open_table_must_be_public() -> None:
    command = CreateGame(game_id="g", players=("Ada", None), spectators="token", open=True)
    with pytest.raises(BadRequest, match="an open table is public"):
        decide(Game(), command)


def test_a_game_of_open_seats_only_is_created() -> None:
    assert start(None, None).open_seats() == (0, 1)


def test_names_at_creation_are_unique_among_the_named_seats_only() -> None:
    with pytest.raises(BadName, match="seat 2: the name is already seat 0's"):
        start("Ada", None, "ada")


def test_create_game_decodes_null_players() -> None:
    raw = b'{"type": "create_game", "game_id": "g", "players": ["Ada", null], "open": true}'
    command = msgspec.json.decode(raw, type=domain.Command)
    assert command == CreateGame(game_id="g", players=("Ada", None), open=True)


# Taking a seat -------------------------------------------------------------------------------------


def test_an_open_seat_takes_a_name_trimmed_and_in_nfc() -> None:
    state = start("Ada", None)
    [event] = decide(state, take(1, "  Be\u0301n "))
    assert event == SeatTaken(seat=1, name="B\u00e9n")
    state = evolve(state, event)
    assert state.players == ("Ada", "B\u00e9n")
    assert state.full


def test_a_join_takes_the_seat_and_gives_it_a_new_token_in_one_command() -> None:
    events = decide(start("Ada", None), TakeSeat(seat=1, id=cid(), name="Ben", credential=HASH))
    assert events == [SeatTaken(seat=1, name="Ben"), SeatTokenReissued(seat=1, credential=HASH)]


def test_a_named_seat_answers_seat_taken() -> None:
    state = start("Ada", None)
    with pytest.raises(SeatHasName, match="seat 0 is Ada's already") as caught:
        decide(state, take(0, "Ben"))
    assert caught.value.code == "seat_taken"


def test_a_seat_taken_by_another_take_seat_is_refused() -> None:
    state = run(start("Ada", None), take(1, "Ben"))
    with pytest.raises(SeatHasName):
        decide(state, take(1, "Cy"))


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("ADA", "the name is already seat 0's"),
        ("  ", "1 to 32 characters"),
        ("x" * 33, "1 to 32 characters"),
        ("Be\u200bn", r"U\+200B"),
    ],
)
def test_a_name_the_rules_refuse_is_bad_request(name: str, why: str) -> None:
    with pytest.raises(BadName, match=why) as caught:
        decide(start("Ada", None), take(1, name))
    assert caught.value.code == "bad_request"


def test_take_seat_from_a_seat_that_is_not_the_games_is_forbidden() -> None:
    with pytest.raises(Forbidden):
        decide(start("Ada", None), take(3, "Ben"))


def test_take_seat_of_a_closed_seat_is_seat_closed() -> None:
    state = run(start("Ada", None, None), close(2))
    with pytest.raises(SeatIsClosed) as caught:
        decide(state, take(2, "Cy"))
    assert caught.value.code == "seat_closed"


def test_take_seat_once_the_game_ended_is_game_over() -> None:
    state = run(start("Ada"), end())
    with pytest.raises(GameOver):
        decide(state, take(0, "Ben"))


def test_take_seat_in_an_unknown_game_is_unknown_game() -> None:
    with pytest.raises(domain.UnknownGame):
        decide(Game(), take(0, "Ben"))


# Placements wait for a full table ----------------------------------------------------------------------


def test_placements_and_end_are_refused_until_the_table_is_full() -> None:
    state = start("Ada", None, None)
    with pytest.raises(TableNotFull, match=r"seat\(s\) 1, 2 still open") as caught:
        decide(state, place(0))
    assert caught.value.code == "table_not_full"
    with pytest.raises(TableNotFull):
        decide(state, end())
    state = run(state, take(1, "Ben"))
    with pytest.raises(TableNotFull, match=r"seat\(s\) 2 still open"):
        decide(state, place(0))
    state = run(state, close(2), place(0))
    assert state.placements == 1


def test_an_open_seat_itself_cannot_place() -> None:
    with pytest.raises(TableNotFull):
        decide(start("Ada", None), place(1))


# Closing a seat ------------------------------------------------------------------------------------


def test_a_closed_seat_is_left_out_of_the_ranking_and_cannot_play() -> None:
    state = run(start("Ada", None, "Cy"), close(1), place(0), place(2, "clarinet"))
    assert state.closed == (1,)
    with pytest.raises(SeatIsClosed):
        decide(state, place(1))
    [ended] = decide(state, end())
    assert isinstance(ended, GameEnded)
    assert [rank.seat for rank in ended.ranking] == [0, 2]
    assert [score.seat for score in ended.scores] == [0, 1, 2]


def test_closing_a_named_seat_is_seat_taken() -> None:
    with pytest.raises(SeatHasName, match="only an open seat can be closed"):
        decide(start("Ada", None), close(0))


def test_closing_after_a_placement_is_game_started_even_for_a_named_seat() -> None:
    state = run(start("Ada", None), take(1, "Ben"), place(0))
    with pytest.raises(GameStarted) as caught:
        decide(state, close(1))
    assert caught.value.code == "game_started"
    # A take-back does not make the game unstarted: the placement was made.
    state = run(state, TakeBack(seat=0, id=cid()))
    with pytest.raises(GameStarted):
        decide(state, close(1))


def test_closing_a_closed_seat_is_seat_closed() -> None:
    state = run(start("Ada", None, None), close(1))
    with pytest.raises(SeatIsClosed):
        decide(state, close(1))


def test_closing_a_seat_that_is_not_the_games_is_bad_request() -> None:
    with pytest.raises(BadRequest, match="seats 0 to 1"):
        decide(start("Ada", None), close(3))


def test_the_last_seat_cannot_be_closed() -> None:
    state = run(start(None, None), close(0))
    with pytest.raises(BadRequest, match="at least one seat"):
        decide(state, close(1))


def test_closing_in_an_ended_game_is_game_over() -> None:
    state = run(start("Ada"), end())
    with pytest.raises(GameOver):
        decide(state, close(0))


def test_the_first_seat_not_closed_ends_the_game() -> None:
    state = run(start(None, "Ben", "Cy"), close(0))
    with pytest.raises(Forbidden, match=r"seat 1 \(the first seat not closed\)"):
        decide(state, end(2))
    assert run(state, end(1)).ended


# Reissuing a seat's token ------------------------------------------------------------------------------


def test_a_reissue_records_the_new_hash_and_ends_the_take_back() -> None:
    state = run(start("Ada", "Ben"), place(0))
    [event] = decide(state, ReissueToken(target=1, id=cid(), credential=HASH))
    assert event == SeatTokenReissued(seat=1, credential=HASH)
    state = evolve(state, event)
    assert state.reissued == {1: HASH}
    with pytest.raises(domain.CannotTakeBack):
        decide(state, TakeBack(seat=0, id=cid()))


def test_a_reissue_of_an_open_seat_is_allowed() -> None:
    state = run(start("Ada", None), ReissueToken(target=1, id=cid(), credential=HASH))
    assert state.reissued == {1: HASH}


def test_a_reissue_refusals() -> None:
    with pytest.raises(BadRequest):
        decide(start("Ada"), ReissueToken(target=2, id=cid(), credential=HASH))
    with pytest.raises(SeatIsClosed):
        decide(run(start("Ada", None), close(1)), ReissueToken(target=1, id=cid(), credential=HASH))
    with pytest.raises(GameOver):
        decide(run(start("Ada"), end()), ReissueToken(target=0, id=cid(), credential=HASH))
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"target": 0, "id": "x", "credential": "not-a-hash"}, ReissueToken)


# Playing again ------------------------------------------------------------------------------------


def test_play_again_before_the_end_is_game_not_over() -> None:
    with pytest.raises(GameNotOver) as caught:
        decide(start("Ada", "Ben"), PlayAgain(seat=1, id=cid(), game_id="g2"))
    assert caught.value.code == "game_not_over"


def test_play_again_names_the_next_game_once() -> None:
    state = run(start("Ada", "Ben"), end())
    [event] = decide(state, PlayAgain(seat=1, id=cid(), game_id="g2"))
    assert event == NextGame(game_id="g2")
    state = evolve(state, event)
    assert state.next_game == "g2"
    with pytest.raises(NextGameExists) as caught:
        decide(state, PlayAgain(id=cid(), game_id="g3"))
    assert caught.value.game_id == "g2"


def test_play_again_from_a_seat_that_is_not_the_games_is_forbidden() -> None:
    with pytest.raises(Forbidden):
        decide(run(start("Ada"), end()), PlayAgain(seat=2, id=cid(), game_id="g2"))


def test_the_next_game_keeps_seats_names_layout_spectators_and_openness() -> None:
    state = run(
        Game(),
        CreateGame(game_id="g", players=("Ada", None, None), open=True, max_placements=7),
        take(1, "Ben"),
        close(2),
        end(),
    )
    created = next_game(state, "g2")
    assert created == GameCreated(
        game_id="g2",
        players=("Ada", "Ben", None),
        layout=domain.STANDARD,
        max_placements=7,
        open=True,
        closed=(2,),
        follows="g",
    )
    following = evolve(Game(), created)
    assert following.full and following.closed == (2,) and following.follows == "g"
    private = run(Game(), CreateGame(game_id="p", players=("Ada",), spectators="token"), end())
    assert next_game(private, "p2").spectators == "token"


# Folding -------------------------------------------------------------------------------------------


def test_fold_equals_evolve_over_seat_events() -> None:
    events: list[Event] = [
        *decide(Game(), CreateGame(game_id="g", players=("Ada", None, None), open=True)),
    ]
    state = functools.reduce(evolve, events, Game())
    for command in (
        take(1, "Ben"),
        close(2),
        place(0),
        ReissueToken(target=1, id=cid(), credential=HASH),
        place(1, "clarinet"),
        end(),
        PlayAgain(seat=0, id=cid(), game_id="g2"),
    ):
        new = decide(state, command)
        events += new
        state = functools.reduce(evolve, new, state)
    assert fold(events) == state
    assert state.next_game == "g2" and state.reissued == {1: HASH} and state.closed == (2,)


def test_ranking_leaves_closed_seats_out() -> None:
    final = (
        domain.Score(seat=0, chairs=(), prestige=3, resources={}),
        domain.Score(seat=1, chairs=(), prestige=0, resources={}),
        domain.Score(seat=2, chairs=(), prestige=3, resources={}),
    )
    assert [(r.seat, r.rank) for r in ranking(final, (1,))] == [(0, 1), (2, 1)]


def test_seat_closed_event_round_trips() -> None:
    data = msgspec.json.encode(SeatClosed(seat=2))
    assert data == b'{"type":"SeatClosed","seat":2}'
    assert msgspec.json.decode(data, type=domain.Event) == SeatClosed(seat=2)
