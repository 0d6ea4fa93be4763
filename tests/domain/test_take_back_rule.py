"""Taking back a placement (a table rule of this server, docs/rules.md): who may, when, what it restores."""

from __future__ import annotations

import functools
import itertools

import msgspec
import pytest

import domain
from domain import (
    CannotTakeBack,
    ChairClaimed,
    ChairStolen,
    CreateGame,
    EndGame,
    Forbidden,
    GameOver,
    InstrumentToken,
    LimitReached,
    PerformanceToken,
    Place,
    PlacedBelowLine,
    PlacementTakenBack,
    Rejected,
    RepairToken,
    StaleVersion,
    TakeBack,
    Token,
    UnknownGame,
    decide,
    evolve,
    fold,
    scores,
)
from domain.vocabulary import Material

ADA, BEN, CY = 0, 1, 2
_ids = itertools.count()
CLASSICAL = PerformanceToken(era="classical")
STRINGS = RepairToken(family="strings")


def start(players: int = 3, max_placements: int = 1000) -> domain.Game:
    names = ("Ada", "Ben", "Cy", "Di")[:players]
    command = CreateGame(game_id="g", players=names, max_placements=max_placements)
    return functools.reduce(evolve, decide(domain.Game(), command), domain.Game())


def place(
    seat: int, token: Token = CLASSICAL, space: str = "viola", materials: tuple[Material, ...] | None = None
) -> Place:
    return Place(seat=seat, id=f"c-{next(_ids)}", token=token, space=space, materials=materials)


def back(seat: int, expected_version: int | None = None) -> TakeBack:
    return TakeBack(seat=seat, id=f"t-{next(_ids)}", expected_version=expected_version)


def play(state: domain.Game, *commands: domain.Command) -> domain.Game:
    for command in commands:
        state = functools.reduce(evolve, decide(state, command), state)
    return state


def same_game(left: domain.Game, right: domain.Game) -> None:
    """Two states that hold the same game: every space, resource and score (not the version)."""
    assert dict(left.spaces) == dict(right.spaces)
    assert left.resources == right.resources
    assert scores(left) == scores(right)
    assert left.ended == right.ended


# What it restores -----------------------------------------------------------------------------------

VIOLA = InstrumentToken(instrument="viola")
RARE_STRINGS = InstrumentToken(instrument="rare_strings")


@pytest.mark.parametrize(
    ("history", "placement", "kind"),
    [
        pytest.param((), place(ADA), ChairClaimed, id="a-chair-claimed-is-empty-again"),
        pytest.param(
            (place(ADA), place(BEN, STRINGS)),
            place(BEN),
            ChairStolen,
            id="a-chair-stolen-by-majority-returns-to-its-holder",
        ),
        pytest.param(
            (place(ADA),), place(BEN, VIOLA), ChairStolen, id="a-chair-stolen-by-an-instrument-returns"
        ),
        pytest.param((place(ADA),), place(BEN), PlacedBelowLine, id="a-token-below-the-line-leaves"),
        pytest.param(
            (place(CY, RARE_STRINGS, "rare_strings", ("wood",)),),
            place(CY, RARE_STRINGS, "rare_strings", ("metal",)),
            ChairClaimed,
            id="a-rare-chair-leaves",
        ),
    ],
)
def test_a_take_back_restores_the_game_as_it_was_before_the_placement(
    history: tuple[Place, ...], placement: Place, kind: type
) -> None:
    before = play(start(), *history)
    (event,) = decide(before, placement)
    assert type(event) is kind
    placed = evolve(before, event)
    (taken,) = decide(placed, back(placement.seat))
    assert taken == PlacementTakenBack(seat=placement.seat, version=placed.version)
    after = evolve(placed, taken)
    same_game(after, before)
    assert after.version == placed.version + 1
    assert after.undo is None
    # Everything derived follows: the next placement is decided exactly as on the state before.
    following = place(BEN, STRINGS)
    assert decide(after, following) == decide(before, following)


def test_the_state_before_the_last_placement_is_one_state_not_a_chain() -> None:
    state = play(start(), place(ADA), place(BEN), place(CY))
    assert state.undo is not None
    assert state.undo.seat == CY
    assert state.undo.before.undo is None
    assert state.undo.before.version == state.version - 1
    # Spaces the placement did not touch are shared with the state before it, not copied.
    assert all(state.spaces[s] is state.undo.before.spaces[s] for s in state.spaces if s != "viola")


def test_a_take_back_counts_toward_the_placement_limit() -> None:
    state = play(start(max_placements=3), place(ADA), back(ADA))
    assert state.placements == 2
    state = play(state, place(BEN))
    assert state.placements == 3
    with pytest.raises(LimitReached, match="maximum of 3 placements"):
        decide(state, back(BEN))
    with pytest.raises(LimitReached):
        decide(state, place(CY))


def test_a_placement_can_be_made_again_after_its_take_back() -> None:
    state = play(start(), place(ADA), back(ADA), place(ADA))
    assert state.undo is not None and state.undo.seat == ADA
    assert state.spaces["viola"].chair == domain.Seated(ADA, CLASSICAL)
    state = play(state, back(ADA))
    assert state.spaces["viola"].chair is None


def test_a_take_back_accepts_the_current_expected_version() -> None:
    state = play(start(), place(ADA))
    (event,) = decide(state, back(ADA, expected_version=state.version))
    assert event == PlacementTakenBack(seat=ADA, version=2)


# When it is refused ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        pytest.param((), r"last event \(version 1\) is not a placement", id="nothing-placed-yet"),
        pytest.param((place(ADA), back(ADA)), "not a placement", id="a-take-back-is-not-taken-back"),
        pytest.param((place(BEN),), "is seat 1's: only your own", id="another-seats-placement"),
        pytest.param(
            (place(ADA), place(BEN)), "is seat 1's", id="an-earlier-placement-once-another-followed"
        ),
    ],
)
def test_only_the_seats_own_placement_while_it_is_the_last_event(
    commands: tuple[domain.Command, ...], message: str
) -> None:
    state = play(start(), *commands)
    with pytest.raises(CannotTakeBack, match=message) as caught:
        decide(state, back(ADA))
    assert caught.value.code == "cannot_take_back"


@pytest.mark.parametrize(
    ("state", "command", "error"),
    [
        pytest.param(lambda: domain.Game(), back(ADA), UnknownGame, id="unknown-game"),
        pytest.param(lambda: play(start(), place(BEN)), back(3), Forbidden, id="forbidden-before-the-rule"),
        pytest.param(
            lambda: play(start(), place(ADA), EndGame(seat=ADA, id="e")),
            back(ADA, expected_version=0),
            GameOver,
            id="game-over-before-stale-version-and-the-rule",
        ),
        pytest.param(
            lambda: play(start(), place(BEN)), back(ADA, expected_version=0), StaleVersion, id="stale"
        ),
        pytest.param(
            lambda: play(start(max_placements=1), place(BEN)),
            back(ADA),
            LimitReached,
            id="limit-reached-before-the-rule",
        ),
        pytest.param(lambda: play(start(), place(BEN)), back(ADA), CannotTakeBack, id="the-rule"),
    ],
)
def test_when_several_reasons_apply_the_first_in_protocol_order_answers(
    state: object, command: TakeBack, error: type[Rejected]
) -> None:
    assert callable(state)
    with pytest.raises(Rejected) as caught:
        decide(state(), command)
    assert type(caught.value) is error


def test_after_the_game_ended_nothing_can_be_taken_back() -> None:
    state = play(start(), place(ADA), EndGame(seat=ADA, id="e"))
    assert state.undo is None
    with pytest.raises(GameOver):
        decide(state, back(ADA))


# Folding it ------------------------------------------------------------------------------------------


def events_of(*commands: domain.Command) -> list[domain.Event]:
    state, events = domain.Game(), []
    for command in (CreateGame(game_id="g", players=("Ada", "Ben", "Cy")), *commands):
        new = decide(state, command)
        events += new
        state = functools.reduce(evolve, new, state)
    return events


@pytest.mark.parametrize(
    "commands",
    [
        pytest.param((place(ADA), back(ADA)), id="place-take-back"),
        pytest.param((place(ADA), back(ADA), place(BEN), place(CY)), id="then-more"),
        pytest.param((place(ADA), place(BEN), back(BEN), place(BEN, VIOLA), back(BEN)), id="twice"),
        pytest.param((place(ADA), place(BEN), back(BEN), EndGame(seat=ADA, id="e")), id="then-end"),
    ],
)
def test_folding_in_one_pass_equals_evolving_from_any_split(commands: tuple[domain.Command, ...]) -> None:
    events = events_of(*commands)
    expected = functools.reduce(evolve, events, domain.Game())
    assert fold(events) == expected
    for split in range(len(events) + 1):
        start_state = functools.reduce(evolve, events[:split], domain.Game())
        assert fold(events[split:], start_state) == expected


def test_folding_nothing_keeps_the_state_and_what_a_take_back_needs() -> None:
    state = play(start(), place(ADA))
    assert fold([], state) is state


def test_a_take_back_with_nothing_to_take_back_only_counts() -> None:
    """Not a fact `decide` gives (orchestra verify refuses it), but evolve and fold stay total."""
    state = play(start(), place(ADA), back(ADA))
    odd = PlacementTakenBack(seat=ADA, version=3)
    after = evolve(state, odd)
    assert (after.version, after.placements) == (state.version + 1, state.placements + 1)
    same_game(after, state)
    events = [*events_of(place(ADA), back(ADA)), odd]
    assert fold(events) == after
    ended = [*events_of(place(ADA), EndGame(seat=ADA, id="e")), odd]
    assert fold(ended) == functools.reduce(evolve, ended, domain.Game())


# On the wire -------------------------------------------------------------------------------------------


def test_the_command_and_the_event_read_and_write_the_wire_json() -> None:
    command = msgspec.json.decode(b'{"type":"take_back","seat":1,"id":"t-1"}', type=domain.Command)
    assert command == TakeBack(seat=1, id="t-1")
    event = PlacementTakenBack(seat=1, version=7)
    assert msgspec.json.decode(msgspec.json.encode(event)) == {
        "type": "PlacementTakenBack",
        "seat": 1,
        "version": 7,
    }
    assert msgspec.json.decode(msgspec.json.encode(event), type=domain.Event) == event


def test_a_final_line_break_in_the_id_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.id"):
        msgspec.json.decode(b'{"type":"take_back","seat":0,"id":"t-1\\n"}', type=domain.Command)
