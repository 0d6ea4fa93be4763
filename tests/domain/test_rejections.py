"""Every rejection code of protocol.md that the rules raise, and which one answers when several apply."""

from __future__ import annotations

import functools
import itertools

import msgspec
import pytest

import domain
from domain import (
    STANDARD,
    BadRequest,
    CreateGame,
    EndGame,
    Forbidden,
    GameCreated,
    GameEnded,
    GameOver,
    IllegalSpace,
    InstrumentToken,
    LimitReached,
    MissingChoice,
    PerformanceToken,
    Place,
    Rejected,
    RepairToken,
    StaleVersion,
    Token,
    UnknownGame,
    decide,
    evolve,
)
from domain.vocabulary import Material

ADA, BEN, CY = 0, 1, 2
_ids = itertools.count()
CLASSICAL = PerformanceToken(era="classical")


def start(players: int = 3, max_placements: int = 1000) -> domain.Game:
    names = ("Ada", "Ben", "Cy", "Di")[:players]
    command = CreateGame(game_id="g", players=names, max_placements=max_placements)
    return functools.reduce(evolve, decide(domain.Game(), command), domain.Game())


def place(
    seat: int,
    token: Token = CLASSICAL,
    space: str = "viola",
    *,
    skill: int = 1,
    materials: tuple[Material, ...] | None = None,
    expected_version: int | None = None,
) -> Place:
    return Place(
        seat=seat,
        id=f"c-{next(_ids)}",
        token=token,
        space=space,
        skill=skill,
        materials=materials,
        expected_version=expected_version,
    )


def end(seat: int = ADA, expected_version: int | None = None) -> EndGame:
    return EndGame(seat=seat, id=f"e-{next(_ids)}", expected_version=expected_version)


def play(state: domain.Game, *commands: domain.Command) -> domain.Game:
    for command in commands:
        state = functools.reduce(evolve, decide(state, command), state)
    return state


def ended() -> domain.Game:
    return play(start(), place(BEN), end(ADA))


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(BadRequest, "bad_request", id="bad-request"),
        pytest.param(Forbidden, "forbidden", id="forbidden"),
        pytest.param(UnknownGame, "unknown_game", id="unknown-game"),
        pytest.param(GameOver, "game_over", id="game-over"),
        pytest.param(StaleVersion, "stale_version", id="stale-version"),
        pytest.param(LimitReached, "limit_reached", id="limit-reached"),
        pytest.param(IllegalSpace, "illegal_space", id="illegal-space"),
        pytest.param(MissingChoice, "missing_choice", id="missing-choice"),
    ],
)
def test_each_rejection_carries_the_stable_code_of_protocol_md(error: type[Rejected], code: str) -> None:
    rejection = error("why")
    assert isinstance(rejection, Rejected)
    assert rejection.code == code
    assert rejection.message == "why"


# end_game -----------------------------------------------------------------------------------------


def test_the_player_in_seat_0_ends_the_game() -> None:
    (event,) = decide(start(), end(ADA))
    assert isinstance(event, GameEnded)
    assert event.seat == ADA
    assert evolve(start(), event).ended is True


@pytest.mark.parametrize("seat", [pytest.param(seat, id=f"seat-{seat}") for seat in (1, 2, 3)])
def test_no_other_seat_may_end_the_game(seat: int) -> None:
    with pytest.raises(Forbidden) as caught:
        decide(start(), end(seat))
    assert caught.value.code == "forbidden"


def test_ending_the_game_is_forbidden_to_seat_1_with_the_reason() -> None:
    with pytest.raises(Forbidden, match="only the player in seat 0 may end the game"):
        decide(start(), end(BEN))


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(place(3), id="place"),
        pytest.param(end(3), id="end-game"),
    ],
)
def test_a_seat_outside_the_game_is_forbidden(command: domain.Command) -> None:
    with pytest.raises(Forbidden, match="seat 3 is not a seat of this game"):
        decide(start(players=3), command)


# game_over ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(place(BEN), id="place"),
        pytest.param(
            place(ADA, InstrumentToken(instrument="rare_winds"), "rare_winds"), id="place-in-a-rare-space"
        ),
        pytest.param(end(ADA), id="end-game-again"),
    ],
)
def test_nothing_is_accepted_after_the_game_ended(command: domain.Command) -> None:
    with pytest.raises(GameOver, match="the game has ended"):
        decide(ended(), command)


# stale_version ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(place(BEN, expected_version=1), id="place-behind"),
        pytest.param(place(BEN, expected_version=3), id="place-ahead"),
        pytest.param(end(ADA, expected_version=0), id="end-game-behind"),
    ],
)
def test_a_command_expecting_another_version_is_stale(command: domain.Command) -> None:
    state = play(start(), place(BEN))
    assert state.version == 2
    with pytest.raises(StaleVersion, match="the game is at version 2"):
        decide(state, command)


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(place(BEN, expected_version=2), id="place"),
        pytest.param(end(ADA, expected_version=2), id="end-game"),
    ],
)
def test_a_command_expecting_the_current_version_is_accepted(command: domain.Command) -> None:
    events = decide(play(start(), place(BEN)), command)
    assert len(events) == 1


# limit_reached ------------------------------------------------------------------------------------


def test_a_placement_beyond_max_placements_is_refused() -> None:
    state = play(start(max_placements=2), place(ADA), place(BEN))
    with pytest.raises(LimitReached, match="maximum of 2 placements"):
        decide(state, place(CY, RepairToken(family="winds"), "oboe"))


def test_the_last_allowed_placement_is_accepted() -> None:
    state = play(start(max_placements=2), place(ADA))
    (event,) = decide(state, place(BEN))
    assert evolve(state, event).placements == 2


def test_a_full_game_can_still_be_ended() -> None:
    state = play(start(max_placements=1), place(ADA))
    (event,) = decide(state, end(ADA))
    assert isinstance(event, GameEnded)


# unknown_game -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(place(ADA), id="place"),
        pytest.param(end(ADA), id="end-game"),
    ],
)
def test_a_game_not_yet_created_is_an_unknown_game(command: domain.Command) -> None:
    with pytest.raises(UnknownGame, match="no such game"):
        decide(domain.Game(), command)


# bad_request --------------------------------------------------------------------------------------


def test_an_unknown_space_is_a_bad_request_that_lists_the_spaces() -> None:
    with pytest.raises(BadRequest) as caught:
        decide(start(), place(ADA, space="tuba"))
    message = caught.value.message
    assert message.startswith("'tuba' is not a space; spaces are lute, violin_bc, ")
    assert message.endswith("rare_winds or rare_percussion_keyboards")
    assert all(space in message for space in STANDARD.space_ids)


def test_an_unknown_instrument_is_a_bad_request_that_lists_the_instruments() -> None:
    with pytest.raises(BadRequest) as caught:
        decide(start(), place(ADA, InstrumentToken(instrument="tuba"), "viola"))
    message = caught.value.message
    assert message.startswith("'tuba' is not an instrument; instruments are lute, violin, viola, ")
    assert "violin_bc" not in message


def test_a_space_id_is_not_an_instrument_id() -> None:
    with pytest.raises(BadRequest, match="'violin_bc' is not an instrument"):
        decide(start(), place(ADA, InstrumentToken(instrument="violin_bc"), "violin_bc"))


@pytest.mark.parametrize("skill", [pytest.param(s, id=f"skill-{s}") for s in (0, -1, 11)])
def test_a_skill_outside_1_to_10_is_a_bad_request_even_without_decoding(skill: int) -> None:
    with pytest.raises(BadRequest, match="skill must be 1 to 10"):
        decide(start(), place(ADA, InstrumentToken(instrument="viola"), skill=skill))


# create_game --------------------------------------------------------------------------------------


def test_creating_a_game_records_the_whole_layout_and_the_settings() -> None:
    command = CreateGame(game_id="g7", players=("Ada", "Ben"), spectators="token", max_placements=50)
    (event,) = decide(domain.Game(), command)
    assert event == GameCreated(
        game_id="g7", players=("Ada", "Ben"), layout=STANDARD, spectators="token", max_placements=50
    )
    state = evolve(domain.Game(), event)
    assert (state.version, state.players, state.max_placements, state.spectators) == (
        1,
        ("Ada", "Ben"),
        50,
        "token",
    )
    assert state.resources == ({}, {})
    assert set(state.spaces) == set(STANDARD.space_ids)


def test_a_game_can_be_created_on_a_layout_passed_in() -> None:
    other = msgspec.structs.replace(STANDARD, name="mine", verified=True)
    (event,) = decide(
        domain.Game(), CreateGame(game_id="g", players=("Ada",), layout="mine"), {"mine": other}
    )
    assert isinstance(event, GameCreated)
    assert event.layout == other


def test_creating_a_game_that_exists_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="game 'g' already exists"):
        decide(start(), CreateGame(game_id="g", players=("Ada",)))


@pytest.mark.parametrize(
    ("players", "message"),
    [
        pytest.param((), "a game needs 1 to 4 players", id="no-players"),
        pytest.param(("a", "b", "c", "d", "e"), "a game needs 1 to 4 players", id="five-players"),
        pytest.param(("Ada", ""), "a player's name must be 1 to 32 characters", id="empty-name"),
        pytest.param(("x" * 33,), "a player's name must be 1 to 32 characters", id="name-too-long"),
    ],
)
def test_a_create_command_built_without_decoding_is_still_checked(
    players: tuple[str, ...], message: str
) -> None:
    with pytest.raises(BadRequest, match=message):
        decide(domain.Game(), CreateGame(game_id="g", players=players))


@pytest.mark.parametrize(
    ("layouts", "known"),
    [
        pytest.param(None, "known: standard", id="builtin-layouts"),
        pytest.param({}, "known: nowhere", id="no-layouts"),
        pytest.param({"b": STANDARD, "a": STANDARD}, "known: a or b", id="two-layouts-sorted"),
    ],
)
def test_an_unknown_layout_is_a_bad_request_that_lists_the_known_ones(
    layouts: dict[str, domain.Layout] | None, known: str
) -> None:
    command = CreateGame(game_id="g", players=("Ada",), layout="moon")
    with pytest.raises(BadRequest) as caught:
        if layouts is None:
            decide(domain.Game(), command)
        else:
            decide(domain.Game(), command, layouts)
    assert caught.value.message == f"unknown layout 'moon'; {known}"


# precedence: the frame, access, the game, the rule, the choices -------------------------------------

RARE_STRINGS = InstrumentToken(instrument="rare_strings")
WINDS = RepairToken(family="winds")


@pytest.mark.parametrize(
    ("state", "command", "error"),
    [
        pytest.param(ended, place(3, space="tuba"), BadRequest, id="bad-request-before-forbidden"),
        pytest.param(
            ended,
            place(3, RARE_STRINGS, "rare_strings", materials=("wood", "metal")),
            BadRequest,
            id="wrong-materials-before-forbidden",
        ),
        pytest.param(ended, place(3), Forbidden, id="forbidden-before-game-over"),
        pytest.param(ended, end(BEN), Forbidden, id="seat-0-rule-before-game-over"),
        pytest.param(ended, end(3, expected_version=0), Forbidden, id="foreign-seat-before-game-over"),
        pytest.param(ended, place(BEN, expected_version=0), GameOver, id="game-over-before-stale-version"),
        pytest.param(
            ended, end(ADA, expected_version=0), GameOver, id="game-over-before-stale-version-on-end"
        ),
        pytest.param(ended, place(BEN, WINDS), GameOver, id="game-over-before-illegal-space"),
        pytest.param(
            lambda: play(start(max_placements=1), place(ADA)),
            place(BEN, expected_version=0),
            StaleVersion,
            id="stale-version-before-limit-reached",
        ),
        pytest.param(
            lambda: play(start(max_placements=1), place(ADA)),
            place(BEN, WINDS),
            LimitReached,
            id="limit-reached-before-illegal-space",
        ),
        pytest.param(
            lambda: play(start(max_placements=1), place(ADA)),
            place(BEN, RARE_STRINGS, "rare_strings"),
            LimitReached,
            id="limit-reached-before-missing-choice",
        ),
        pytest.param(
            start,
            place(BEN, CLASSICAL, "rare_strings"),
            IllegalSpace,
            id="illegal-space-before-missing-choice",
        ),
        pytest.param(
            start,
            place(BEN, InstrumentToken(instrument="violin"), "rare_strings", skill=6),
            IllegalSpace,
            id="illegal-instrument-before-missing-choice",
        ),
        pytest.param(
            start,
            place(BEN, RARE_STRINGS, "rare_strings", materials=()),
            MissingChoice,
            id="empty-list-is-missing",
        ),
    ],
)
def test_when_several_reasons_apply_the_first_in_protocol_order_answers(
    state: object, command: domain.Command, error: type[Rejected]
) -> None:
    assert callable(state)
    with pytest.raises(Rejected) as caught:
        decide(state(), command)
    assert type(caught.value) is error


def test_a_rejected_command_changes_nothing() -> None:
    state = play(start(), place(ADA))
    before = (state.version, state.placements, dict(state.spaces), state.resources)
    with pytest.raises(IllegalSpace):
        decide(state, place(BEN, WINDS))
    assert (state.version, state.placements, dict(state.spaces), state.resources) == before
    assert decide(state, place(BEN)) == decide(play(start(), place(ADA)), place(BEN))


def test_an_empty_materials_list_on_a_placement_that_pays_none_is_a_bad_request() -> None:
    """rules.md §5: materials on any other placement than Rare Strings are a bad_request, even none."""
    with pytest.raises(BadRequest, match="only named for a space that pays a material"):
        decide(start(), place(BEN, CLASSICAL, "viola", materials=()))
