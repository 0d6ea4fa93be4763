"""The worked example of rules.md §8, one placement at a time (Ada, Ben, Cy; Viola pays 4 money)."""

from __future__ import annotations

import functools

import pytest

from domain import (
    ChairClaimed,
    ChairStolen,
    CreateGame,
    Event,
    Game,
    InstrumentToken,
    PerformanceToken,
    Place,
    PlacedBelowLine,
    RepairToken,
    Seated,
    decide,
    evolve,
)

ADA, BEN, CY = 0, 1, 2
CLASSICAL = PerformanceToken(era="classical")
STRINGS_REPAIR = RepairToken(family="strings")
VIOLA = InstrumentToken(instrument="viola")


def _step(state: Game, command: Place) -> tuple[Game, Event]:
    (event,) = decide(state, command)
    return evolve(state, event), event


def _start() -> Game:
    events = decide(Game(), CreateGame(game_id="example", players=("Ada", "Ben", "Cy")))
    return functools.reduce(evolve, events, Game())


# (command, the one event it causes, everyone's resources afterwards), in the order of rules.md §8.
STEPS: list[tuple[Place, Event, tuple[dict[str, int], ...]]] = [
    (
        Place(seat=ADA, id="1", token=CLASSICAL, space="viola"),
        ChairClaimed(seat=ADA, space="viola", token=CLASSICAL, bonus={"money": 4}),
        ({"money": 4}, {}, {}),
    ),
    (
        Place(seat=BEN, id="2", token=STRINGS_REPAIR, space="viola"),
        PlacedBelowLine(
            seat=BEN, space="viola", token=STRINGS_REPAIR, consolation={"money": 2}, reason="no_majority"
        ),
        ({"money": 4}, {"money": 2}, {}),
    ),
    (
        Place(seat=BEN, id="3", token=CLASSICAL, space="viola"),
        ChairStolen(
            seat=BEN, space="viola", token=CLASSICAL, bonus={"money": 4}, from_seat=ADA, reason="majority"
        ),
        ({"money": 4}, {"money": 6}, {}),
    ),
    (
        Place(seat=ADA, id="4", token=STRINGS_REPAIR, space="viola", consolation="inspiration"),
        PlacedBelowLine(
            seat=ADA,
            space="viola",
            token=STRINGS_REPAIR,
            consolation={"inspiration": 1},
            reason="no_majority",
        ),
        ({"money": 4, "inspiration": 1}, {"money": 6}, {}),
    ),
    (
        Place(seat=CY, id="5", token=VIOLA, space="viola", skill=6),
        ChairStolen(
            seat=CY,
            space="viola",
            token=VIOLA,
            bonus={"money": 8},
            from_seat=BEN,
            reason="instrument",
            doubled=True,
        ),
        ({"money": 4, "inspiration": 1}, {"money": 6}, {"money": 8}),
    ),
    (
        Place(seat=BEN, id="6", token=CLASSICAL, space="viola"),
        PlacedBelowLine(
            seat=BEN, space="viola", token=CLASSICAL, consolation={"money": 2}, reason="instrument_holds"
        ),
        ({"money": 4, "inspiration": 1}, {"money": 8}, {"money": 8}),
    ),
]


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(1, id="1-ada-claims-the-empty-chair"),
        pytest.param(2, id="2-ben-ties-one-all-and-goes-below-the-line"),
        pytest.param(3, id="3-ben-steals-with-two-against-one"),
        pytest.param(4, id="4-ada-ties-two-all-and-goes-below-the-line"),
        pytest.param(5, id="5-cy-instrument-takes-the-chair-with-a-doubled-bonus"),
        pytest.param(6, id="6-ben-goes-below-the-instrument"),
    ],
)
def test_each_step_of_the_worked_example_gives_its_event_and_resources(step: int) -> None:
    state = _start()
    for command, _, _ in STEPS[: step - 1]:
        state, _ = _step(state, command)
    command, expected, resources = STEPS[step - 1]
    state, event = _step(state, command)
    assert event == expected
    assert state.resources == resources


def test_the_whole_worked_example_step_by_step() -> None:
    state = _start()

    # 1. Chair empty: Ada claims it, +4 money.
    state, event = _step(state, Place(seat=ADA, id="1", token=CLASSICAL, space="viola"))
    assert isinstance(event, ChairClaimed)
    assert event.bonus == {"money": 4}
    assert state.resources == ({"money": 4}, {}, {})

    # 2. Ben 1 vs Ada 1: no majority; below the line, Ben +2 money.
    state, event = _step(state, Place(seat=BEN, id="2", token=STRINGS_REPAIR, space="viola"))
    assert isinstance(event, PlacedBelowLine)
    assert event.reason == "no_majority"
    assert event.consolation == {"money": 2}
    assert state.resources == ({"money": 4}, {"money": 2}, {})
    assert state.spaces["viola"].chair == Seated(ADA, CLASSICAL)

    # 3. Ben 2 > Ada 1: Ben steals; Ada's token goes below the line; Ben +4 money.
    state, event = _step(state, Place(seat=BEN, id="3", token=CLASSICAL, space="viola"))
    assert isinstance(event, ChairStolen)
    assert event.reason == "majority"
    assert event.from_seat == ADA
    assert event.bonus == {"money": 4}
    assert state.resources == ({"money": 4}, {"money": 6}, {})
    assert state.spaces["viola"].chair == Seated(BEN, CLASSICAL)
    assert state.spaces["viola"].below == (Seated(BEN, STRINGS_REPAIR), Seated(ADA, CLASSICAL))

    # 4. Ada 2 = Ben 2: a tie, below the line; Ada takes the consolation (here inspiration).
    state, event = _step(
        state, Place(seat=ADA, id="4", token=STRINGS_REPAIR, space="viola", consolation="inspiration")
    )
    assert isinstance(event, PlacedBelowLine)
    assert event.reason == "no_majority"
    assert event.consolation == {"inspiration": 1}
    assert state.resources == ({"money": 4, "inspiration": 1}, {"money": 6}, {})
    assert state.spaces["viola"].chair == Seated(BEN, CLASSICAL)

    # 5. Cy's Viola, worker skill 6: the instrument takes the chair from Ben's performance, +8 money.
    state, event = _step(state, Place(seat=CY, id="5", token=VIOLA, space="viola", skill=6))
    assert isinstance(event, ChairStolen)
    assert event.reason == "instrument"
    assert event.from_seat == BEN
    assert event.bonus == {"money": 8}
    assert event.doubled is True
    assert state.resources == ({"money": 4, "inspiration": 1}, {"money": 6}, {"money": 8})
    assert state.spaces["viola"].chair == Seated(CY, VIOLA)

    # 6. The chair is held by an instrument: below the line, consolation.
    state, event = _step(state, Place(seat=BEN, id="6", token=CLASSICAL, space="viola"))
    assert isinstance(event, PlacedBelowLine)
    assert event.reason == "instrument_holds"
    assert event.consolation == {"money": 2}
    assert state.resources == ({"money": 4, "inspiration": 1}, {"money": 8}, {"money": 8})

    viola = state.spaces["viola"]
    assert viola.chair == Seated(CY, VIOLA)
    assert viola.below == (
        Seated(BEN, STRINGS_REPAIR),
        Seated(ADA, CLASSICAL),
        Seated(ADA, STRINGS_REPAIR),
        Seated(BEN, CLASSICAL),
        Seated(BEN, CLASSICAL),
    )
    assert state.placements == 6
    assert state.version == 7
