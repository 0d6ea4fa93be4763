"""Era counting with the Violin rule of rules.md §6: a Violin token counts for one era per evaluation."""

from __future__ import annotations

from collections import Counter
from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import domain
from domain import (
    STANDARD,
    ChairClaimed,
    GameCreated,
    InstrumentToken,
    PerformanceToken,
    PlacedBelowLine,
    RepairToken,
    Token,
    evolve,
)
from projections import (
    Assigned,
    Counted,
    EraCount,
    count_eras_covered,
    count_in_era,
    count_in_family,
    tokens_of,
)
from projections.eras import Kind

ADA, BEN = 0, 1
ERAS = ("baroque", "classical", "romantic")
FAMILIES = ("strings", "winds", "percussion_keyboards")
KINDS: tuple[Kind, ...] = ("instrument", "performance", "repair")
SPACES = {space.id: space for space in STANDARD.spaces}


def token_for(space_id: str, kind: Kind, choice: int = 0) -> Token:
    """A token of `kind` that may lie in `space_id` (a rare space only takes its instrument)."""
    space = SPACES[space_id]
    if kind == "instrument" or space.rare:
        return InstrumentToken(instrument=space.instrument)
    if kind == "performance":
        return PerformanceToken(era=space.eras[choice % len(space.eras)])
    return RepairToken(family=space.family)


def board(*placements: tuple[int, str, Kind, bool]) -> domain.Game:
    """A game of two players holding these tokens: (seat, space, kind, wants the chair).

    A token that wants the chair takes it when it is empty (or the space is rare); otherwise it lies below
    the line. Events are facts, so they are folded with evolve directly.
    """
    state = evolve(domain.Game(), GameCreated(game_id="g", players=("Ada", "Ben"), layout=STANDARD))
    for seat, space_id, kind, wants_chair in placements:
        token = token_for(space_id, kind)
        event: domain.Event
        if SPACES[space_id].rare or (wants_chair and state.spaces[space_id].chair is None):
            event = ChairClaimed(seat=seat, space=space_id, token=token, bonus={"money": 1})
        else:
            event = PlacedBelowLine(
                seat=seat, space=space_id, token=token, consolation={"money": 2}, reason="no_majority"
            )
        state = evolve(state, event)
    return state


def eras_of(assignment: tuple[Assigned, ...]) -> dict[str, str]:
    return {a.token.space: a.era for a in assignment}


# rules.md §6 examples -----------------------------------------------------------------------------

EXAMPLE = board(
    (ADA, "lute", "performance", True),
    (ADA, "violin_bc", "performance", True),
    (ADA, "violin_cr", "repair", True),
)


def test_lute_and_both_violins_cover_all_three_eras() -> None:
    result = count_eras_covered(EXAMPLE, ADA)
    assert result.value == 3
    assert eras_of(result.assignment) == {"violin_bc": "classical", "violin_cr": "romantic"}


def test_the_same_player_counts_both_violins_as_classical_for_a_classical_award() -> None:
    result = count_in_era(EXAMPLE, ADA, "classical")
    assert result.value == 2
    assert eras_of(result.assignment) == {"violin_bc": "classical", "violin_cr": "classical"}


@pytest.mark.parametrize(
    ("era", "value", "assigned"),
    [
        pytest.param("baroque", 2, {"violin_bc": "baroque", "violin_cr": "classical"}, id="baroque"),
        pytest.param("classical", 2, {"violin_bc": "classical", "violin_cr": "classical"}, id="classical"),
        pytest.param("romantic", 1, {"violin_bc": "baroque", "violin_cr": "romantic"}, id="romantic"),
    ],
)
def test_each_violin_token_counts_in_the_era_asked_for_when_it_can(
    era: str, value: int, assigned: dict[str, str]
) -> None:
    result = count_in_era(EXAMPLE, ADA, era)  # type: ignore[arg-type]
    assert result.value == value
    assert eras_of(result.assignment) == assigned


def test_a_violin_token_counts_once_not_in_both_its_eras() -> None:
    state = board((ADA, "violin_bc", "performance", True))
    assert count_in_era(state, ADA, "baroque").value == 1
    assert count_in_era(state, ADA, "classical").value == 1
    assert count_eras_covered(state, ADA).value == 1


def test_two_tokens_in_one_violin_space_can_cover_both_its_eras() -> None:
    state = board((ADA, "violin_bc", "performance", True), (ADA, "violin_bc", "repair", False))
    result = count_eras_covered(state, ADA)
    assert result.value == 2
    assert sorted(a.era for a in result.assignment) == ["baroque", "classical"]


def test_a_violin_token_is_not_needed_for_an_era_already_covered() -> None:
    state = board(
        (ADA, "lute", "instrument", True),
        (ADA, "viola", "instrument", True),
        (ADA, "cello", "instrument", True),
        (ADA, "violin_bc", "performance", True),
    )
    result = count_eras_covered(state, ADA)
    assert result.value == 3
    assert len(result.assignment) == 1


def test_rare_tokens_have_a_family_but_no_era() -> None:
    state = board((ADA, "rare_strings", "instrument", True), (ADA, "rare_winds", "instrument", True))
    assert count_eras_covered(state, ADA) == EraCount(0, ())
    assert all(count_in_era(state, ADA, era).value == 0 for era in ERAS)  # type: ignore[arg-type]
    assert count_in_family(state, ADA, "strings").value == 1
    assert count_in_family(state, ADA, "winds").value == 1


# filters ----------------------------------------------------------------------------------------------

MIXED = board(
    (ADA, "viola", "performance", True),
    (BEN, "viola", "repair", False),
    (ADA, "viola", "repair", False),
    (ADA, "clarinet", "instrument", True),
    (BEN, "timpani", "performance", True),
    (ADA, "timpani", "repair", False),
    (ADA, "rare_strings", "instrument", True),
    (ADA, "violin_cr", "performance", False),
)


def test_only_the_players_own_tokens_count() -> None:
    assert count_in_era(MIXED, ADA, "classical").value == 5
    assert count_in_era(MIXED, BEN, "classical").value == 2


def test_chairs_only_leaves_out_the_tokens_below_the_line() -> None:
    assert count_in_era(MIXED, ADA, "classical", chairs_only=True).value == 2
    assert count_in_era(MIXED, BEN, "classical", chairs_only=True).value == 1
    assert count_in_family(MIXED, ADA, "strings", chairs_only=True).value == 2


@pytest.mark.parametrize(
    ("kinds", "value"),
    [
        pytest.param(None, 5, id="all-kinds"),
        pytest.param(["performance"], 2, id="performances"),
        pytest.param(["repair"], 2, id="repairs"),
        pytest.param(["instrument"], 1, id="instruments"),
        pytest.param(["performance", "repair"], 4, id="performances-and-repairs"),
        pytest.param([], 0, id="no-kinds"),
    ],
)
def test_kinds_restricts_the_count_to_those_token_kinds(kinds: list[Kind] | None, value: int) -> None:
    assert count_in_era(MIXED, ADA, "classical", kinds=kinds).value == value


def test_count_in_family_counts_the_row_with_its_rare_space() -> None:
    assert count_in_family(MIXED, ADA, "strings").value == 4
    assert count_in_family(MIXED, ADA, "winds").value == 1
    assert count_in_family(MIXED, ADA, "percussion_keyboards").value == 1
    assert count_in_family(MIXED, ADA, "strings", kinds=["instrument"]) == EraCount(1, ())
    assert count_in_family(MIXED, BEN, "strings").value == 1


def test_eras_covered_respects_chairs_only_and_kinds() -> None:
    state = board(
        (ADA, "lute", "performance", True),
        (ADA, "cello", "repair", True),
        (BEN, "viola", "performance", True),
        (ADA, "viola", "performance", False),
    )
    assert count_eras_covered(state, ADA).value == 3
    assert count_eras_covered(state, ADA, chairs_only=True).value == 2
    assert count_eras_covered(state, ADA, kinds=["performance"]).value == 2
    assert count_eras_covered(state, ADA, chairs_only=True, kinds=["repair"]).value == 1


def test_tokens_of_names_where_each_token_lies() -> None:
    found = tokens_of(MIXED, ADA, kinds=["repair", "performance"])
    assert Counted("viola", True, 0, PerformanceToken(era="classical")) in found
    assert Counted("viola", False, 1, RepairToken(family="strings")) in found
    assert Counted("violin_cr", False, 0, PerformanceToken(era="classical")) in found
    rare = tokens_of(
        board((BEN, "rare_winds", "instrument", True), (ADA, "rare_winds", "instrument", True)), ADA
    )
    assert rare == [Counted("rare_winds", True, 1, InstrumentToken(instrument="rare_winds"))]


def test_a_game_not_yet_created_counts_nothing() -> None:
    empty = domain.Game()
    assert tokens_of(empty, ADA) == []
    assert count_in_era(empty, ADA, "classical") == EraCount(0, ())
    assert count_eras_covered(empty, ADA) == EraCount(0, ())
    assert count_in_family(empty, ADA, "strings") == EraCount(0, ())


# against a brute force over every Violin assignment ------------------------------------------------

placements = st.lists(
    st.tuples(
        st.sampled_from([ADA, BEN]),
        st.sampled_from(list(SPACES)),
        st.sampled_from(KINDS),
        st.booleans(),
    ),
    max_size=9,
)
kind_filters = st.one_of(st.none(), st.sets(st.sampled_from(KINDS)))


def _my_tokens(
    history: list[tuple[int, str, Kind, bool]], seat: int, chairs_only: bool, kinds: set[Kind] | None
) -> list[tuple[tuple[str, bool, int], tuple[str, ...]]]:
    """The seat's tokens as (where: space, in chair, index) and their eras, tracked without the projection."""
    chair: dict[str, int | None] = {s: None for s in SPACES}
    below: dict[str, list[tuple[int, Kind]]] = {s: [] for s in SPACES}
    chairs: dict[str, list[tuple[int, Kind]]] = {s: [] for s in SPACES}
    mine: list[tuple[tuple[str, bool, int], tuple[str, ...]]] = []
    for who, space_id, kind, wants_chair in history:
        space = SPACES[space_id]
        real_kind: Kind = "instrument" if space.rare else kind
        if space.rare:
            where = (space_id, True, len(chairs[space_id]))
            chairs[space_id].append((who, real_kind))
        elif wants_chair and chair[space_id] is None:
            where = (space_id, True, 0)
            chair[space_id] = who
        else:
            where = (space_id, False, len(below[space_id]))
            below[space_id].append((who, real_kind))
        if who == seat and (kinds is None or real_kind in kinds) and (where[1] or not chairs_only):
            mine.append((where, tuple(space.eras)))
    return mine


def _check_assignment(
    result: EraCount, mine: list[tuple[tuple[str, bool, int], tuple[str, ...]]]
) -> dict[tuple[str, bool, int], str]:
    violins = Counter(where for where, eras in mine if len(eras) == 2)
    assigned = Counter((a.token.space, a.token.in_chair, a.token.index) for a in result.assignment)
    assert assigned == violins, "every Violin token is assigned exactly once"
    era_of = {where: eras for where, eras in mine}
    for a in result.assignment:
        assert a.era in era_of[(a.token.space, a.token.in_chair, a.token.index)]
    return {(a.token.space, a.token.in_chair, a.token.index): a.era for a in result.assignment}


@settings(max_examples=150, deadline=None)
@given(history=placements, seat=st.sampled_from([ADA, BEN]), chairs_only=st.booleans(), kinds=kind_filters)
def test_count_in_era_is_the_best_over_every_violin_assignment(
    history: list[tuple[int, str, Kind, bool]], seat: int, chairs_only: bool, kinds: set[Kind] | None
) -> None:
    state = board(*history)
    mine = _my_tokens(history, seat, chairs_only, kinds)
    for era in ERAS:
        brute = max(
            (
                sum(era == chosen for chosen in assignment)
                for assignment in product(*(e or ("-",) for _, e in mine))
            ),
            default=0,
        )
        result = count_in_era(state, seat, era, chairs_only=chairs_only, kinds=kinds)  # type: ignore[arg-type]
        assert result.value == brute
        chosen = _check_assignment(result, mine)
        achieved = sum(
            (chosen[where] if len(eras) == 2 else (eras[0] if eras else None)) == era for where, eras in mine
        )
        assert achieved == result.value


@settings(max_examples=150, deadline=None)
@given(history=placements, seat=st.sampled_from([ADA, BEN]), chairs_only=st.booleans(), kinds=kind_filters)
def test_count_eras_covered_is_the_best_over_every_violin_assignment(
    history: list[tuple[int, str, Kind, bool]], seat: int, chairs_only: bool, kinds: set[Kind] | None
) -> None:
    state = board(*history)
    mine = _my_tokens(history, seat, chairs_only, kinds)
    brute = max(
        (len(set(assignment) - {"-"}) for assignment in product(*(e or ("-",) for _, e in mine))), default=0
    )
    result = count_eras_covered(state, seat, chairs_only=chairs_only, kinds=kinds)
    assert result.value == brute
    chosen = _check_assignment(result, mine)
    covered = {chosen[where] if len(eras) == 2 else eras[0] for where, eras in mine if eras}
    assert len(covered) == result.value


@settings(max_examples=100, deadline=None)
@given(history=placements, seat=st.sampled_from([ADA, BEN]), chairs_only=st.booleans(), kinds=kind_filters)
def test_count_in_family_counts_every_token_of_the_row(
    history: list[tuple[int, str, Kind, bool]], seat: int, chairs_only: bool, kinds: set[Kind] | None
) -> None:
    state = board(*history)
    mine = _my_tokens(history, seat, chairs_only, kinds)
    for family in FAMILIES:
        expected = sum(SPACES[where[0]].family == family for where, _ in mine)
        result = count_in_family(state, seat, family, chairs_only=chairs_only, kinds=kinds)  # type: ignore[arg-type]
        assert result == EraCount(expected, ())
