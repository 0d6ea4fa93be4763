"""Where each token may go (rules.md §4) and how a placement resolves (§5), as tables.

Each table row is: the placements already made / the placement / the one event it must cause.
"""

from __future__ import annotations

import functools
import itertools

import pytest

from domain import (
    STANDARD,
    BadRequest,
    ChairClaimed,
    ChairStolen,
    CreateGame,
    Event,
    Game,
    IllegalSpace,
    InstrumentToken,
    MissingChoice,
    PerformanceToken,
    Place,
    PlacedBelowLine,
    RepairToken,
    Seated,
    Token,
    decide,
    evolve,
    legal_spaces,
)
from domain.vocabulary import Consolation, Material

ADA, BEN, CY = 0, 1, 2
_ids = itertools.count()

SPACES = (
    "lute",
    "violin_bc",
    "viola",
    "violin_cr",
    "cello",
    "oboe",
    "clarinet",
    "flute",
    "harpsichord",
    "timpani",
    "piano",
    "rare_strings",
    "rare_winds",
    "rare_percussion_keyboards",
)


def inst(name: str) -> InstrumentToken:
    return InstrumentToken(instrument=name)


def perf(era: str = "classical") -> PerformanceToken:
    return PerformanceToken(era=era)  # type: ignore[arg-type]


def rep(family: str = "strings") -> RepairToken:
    return RepairToken(family=family)  # type: ignore[arg-type]


# rules.md §4 written out by hand for the standard layout: every token and the spaces it may go to.
LEGAL: list[tuple[str, Token, tuple[str, ...]]] = [
    ("lute-instrument", inst("lute"), ("lute",)),
    ("violin-instrument", inst("violin"), ("violin_bc", "violin_cr")),
    ("viola-instrument", inst("viola"), ("viola",)),
    ("cello-instrument", inst("cello"), ("cello",)),
    ("oboe-instrument", inst("oboe"), ("oboe",)),
    ("clarinet-instrument", inst("clarinet"), ("clarinet",)),
    ("flute-instrument", inst("flute"), ("flute",)),
    ("harpsichord-instrument", inst("harpsichord"), ("harpsichord",)),
    ("timpani-instrument", inst("timpani"), ("timpani",)),
    ("piano-instrument", inst("piano"), ("piano",)),
    ("rare-strings-instrument", inst("rare_strings"), ("rare_strings",)),
    ("rare-winds-instrument", inst("rare_winds"), ("rare_winds",)),
    (
        "rare-percussion-keyboards-instrument",
        inst("rare_percussion_keyboards"),
        ("rare_percussion_keyboards",),
    ),
    ("baroque-performance", perf("baroque"), ("lute", "violin_bc", "oboe", "harpsichord")),
    ("classical-performance", perf("classical"), ("violin_bc", "viola", "violin_cr", "clarinet", "timpani")),
    ("romantic-performance", perf("romantic"), ("violin_cr", "cello", "flute", "piano")),
    ("strings-repair", rep("strings"), ("lute", "violin_bc", "viola", "violin_cr", "cello")),
    ("winds-repair", rep("winds"), ("oboe", "clarinet", "flute")),
    ("percussion-keyboards-repair", rep("percussion_keyboards"), ("harpsichord", "timpani", "piano")),
]

DESTINATIONS = [
    pytest.param(token, space, space in legal, id=f"{label}-to-{space.replace('_', '-')}")
    for label, token, legal in LEGAL
    for space in SPACES
]


def start(players: int = 3, max_placements: int = 1000) -> Game:
    names = ("Ada", "Ben", "Cy", "Di")[:players]
    command = CreateGame(game_id="g", players=names, max_placements=max_placements)
    return functools.reduce(evolve, decide(Game(), command), Game())


def place(
    seat: int,
    token: Token,
    space: str = "viola",
    *,
    skill: int = 1,
    consolation: Consolation = "money",
    materials: tuple[Material, ...] | None = None,
) -> Place:
    return Place(
        seat=seat,
        id=f"c-{next(_ids)}",
        token=token,
        space=space,
        skill=skill,
        consolation=consolation,
        materials=materials,
    )


def given(*history: Place, players: int = 3) -> Game:
    """The state after these placements, each decided and folded in turn."""
    state = start(players)
    for command in history:
        for event in decide(state, command):
            state = evolve(state, event)
    return state


def only_event(state: Game, command: Place) -> Event:
    events = decide(state, command)
    assert len(events) == 1
    return events[0]


# §4: every token kind over all 14 spaces -------------------------------------------------------------


def test_the_legality_table_covers_every_instrument_of_the_standard_layout() -> None:
    instruments = {t.instrument for _, t, _ in LEGAL if isinstance(t, InstrumentToken)}
    assert instruments == set(STANDARD.instruments)
    assert SPACES == STANDARD.space_ids


@pytest.mark.parametrize(("token", "space", "legal"), DESTINATIONS)
def test_a_token_goes_only_where_rules_section_4_allows(token: Token, space: str, legal: bool) -> None:
    materials: tuple[Material, ...] | None = ("wood",) if space == "rare_strings" else None
    command = place(ADA, token, space, materials=materials)
    if legal:
        event = only_event(start(), command)
        assert isinstance(event, ChairClaimed)
        assert (event.seat, event.space, event.token) == (ADA, space, token)
    else:
        with pytest.raises(IllegalSpace) as caught:
            decide(start(), command)
        assert caught.value.code == "illegal_space"


@pytest.mark.parametrize(("label", "token", "legal"), [pytest.param(*row, id=row[0]) for row in LEGAL])
def test_legal_spaces_lists_the_spaces_of_rules_section_4_in_layout_order(
    label: str, token: Token, legal: tuple[str, ...]
) -> None:
    assert legal_spaces(STANDARD, token) == legal


@pytest.mark.parametrize(
    ("token", "space", "expected"),
    [
        pytest.param(
            rep("winds"),
            "lute",
            "a Winds repair cannot go to lute; it may go to oboe, clarinet or flute",
            id="winds-repair-to-lute",
        ),
        pytest.param(
            perf("romantic"),
            "viola",
            "a Romantic performance cannot go to viola; it may go to violin_cr, cello, flute or piano",
            id="romantic-performance-to-viola",
        ),
        pytest.param(
            inst("violin"),
            "viola",
            "a Violin instrument cannot go to viola; it may go to violin_bc or violin_cr",
            id="violin-to-viola",
        ),
        pytest.param(
            rep("percussion_keyboards"),
            "rare_percussion_keyboards",
            "a Percussion & Keyboards repair cannot go to rare_percussion_keyboards; "
            "it may go to harpsichord, timpani or piano",
            id="repair-to-its-rare-space",
        ),
        pytest.param(
            inst("rare_winds"),
            "oboe",
            "a Rare Winds instrument cannot go to oboe; it may go to rare_winds",
            id="rare-instrument-to-a-standard-space",
        ),
    ],
)
def test_an_illegal_space_message_names_the_token_and_lists_the_legal_spaces(
    token: Token, space: str, expected: str
) -> None:
    with pytest.raises(IllegalSpace) as caught:
        decide(start(), place(ADA, token, space))
    assert caught.value.message == expected
    assert str(caught.value) == expected


@pytest.mark.parametrize(
    "space", [pytest.param(s, id=s.replace("_", "-")) for s in ("violin_bc", "violin_cr")]
)
def test_a_violin_may_take_either_violin_space(space: str) -> None:
    event = only_event(start(), place(ADA, inst("violin"), space))
    assert event == ChairClaimed(seat=ADA, space=space, token=inst("violin"), bonus=STANDARD_BONUS[space])


@pytest.mark.parametrize(
    "space", [pytest.param(s, id=s.replace("_", "-")) for s in ("violin_bc", "violin_cr")]
)
def test_a_classical_performance_may_go_to_either_violin_space(space: str) -> None:
    event = only_event(start(), place(ADA, perf("classical"), space))
    assert isinstance(event, ChairClaimed)
    assert event.space == space


@pytest.mark.parametrize(
    ("era", "space"),
    [
        pytest.param("baroque", "violin_bc", id="baroque-to-violin-bc"),
        pytest.param("romantic", "violin_cr", id="romantic-to-violin-cr"),
    ],
)
def test_a_violin_space_takes_the_performances_of_both_its_eras(era: str, space: str) -> None:
    assert isinstance(only_event(start(), place(ADA, perf(era), space)), ChairClaimed)


@pytest.mark.parametrize(
    ("era", "space"),
    [
        pytest.param("romantic", "violin_bc", id="romantic-to-violin-bc"),
        pytest.param("baroque", "violin_cr", id="baroque-to-violin-cr"),
    ],
)
def test_a_violin_space_refuses_performances_of_the_third_era(era: str, space: str) -> None:
    with pytest.raises(IllegalSpace):
        decide(start(), place(ADA, perf(era), space))


@pytest.mark.parametrize(
    ("family", "space"),
    [
        pytest.param("strings", "rare_strings", id="strings"),
        pytest.param("winds", "rare_winds", id="winds"),
        pytest.param("percussion_keyboards", "rare_percussion_keyboards", id="percussion-keyboards"),
    ],
)
def test_a_repair_never_goes_to_a_rare_space_even_of_its_own_family(family: str, space: str) -> None:
    with pytest.raises(IllegalSpace):
        decide(start(), place(ADA, rep(family), space, materials=None))


@pytest.mark.parametrize(
    ("space", "other"),
    [
        pytest.param("rare_strings", "rare_winds", id="rare-strings"),
        pytest.param("rare_winds", "rare_percussion_keyboards", id="rare-winds"),
        pytest.param("rare_percussion_keyboards", "rare_strings", id="rare-percussion-keyboards"),
    ],
)
def test_a_rare_instrument_goes_to_its_own_rare_space_only(space: str, other: str) -> None:
    materials: tuple[Material, ...] | None = ("metal",) if space == "rare_strings" else None
    assert isinstance(only_event(start(), place(ADA, inst(space), space, materials=materials)), ChairClaimed)
    with pytest.raises(IllegalSpace):
        decide(start(), place(ADA, inst(space), other))


@pytest.mark.parametrize("era", [pytest.param(e, id=e) for e in ("baroque", "classical", "romantic")])
def test_a_performance_never_goes_to_a_rare_space(era: str) -> None:
    for space in ("rare_winds", "rare_percussion_keyboards"):
        with pytest.raises(IllegalSpace):
            decide(start(), place(ADA, perf(era), space))


STANDARD_BONUS = {
    "lute": {"money": 2, "animal": 1},
    "violin_bc": {"money": 2, "inspiration": 1},
    "viola": {"money": 4},
    "violin_cr": {"money": 1, "inspiration": 1, "wood": 1},
    "cello": {"money": 1, "wood": 1, "animal": 1},
    "oboe": {"inspiration": 1, "wood": 1},
    "clarinet": {"money": 2, "wood": 1},
    "flute": {"money": 2, "metal": 1},
    "harpsichord": {"money": 1, "wood": 1, "metal": 1},
    "timpani": {"money": 1, "metal": 1, "animal": 1},
    "piano": {"money": 1, "inspiration": 1, "metal": 1},
    "rare_winds": {"money": 1, "inspiration": 1, "apprentice": 1},
    "rare_percussion_keyboards": {"money": 1, "inspiration": 1, "instrument_card": 1},
}


@pytest.mark.parametrize(
    ("space", "bonus"), [pytest.param(s, b, id=s.replace("_", "-")) for s, b in STANDARD_BONUS.items()]
)
def test_an_empty_chair_pays_the_bonus_of_rules_section_3(space: str, bonus: dict[str, int]) -> None:
    (spot,) = [s for s in STANDARD.spaces if s.id == space]
    event = only_event(start(), place(BEN, inst(spot.instrument), space))
    assert isinstance(event, ChairClaimed)
    assert event.bonus == bonus
    assert given(place(BEN, inst(spot.instrument), space)).resources[BEN] == bonus


def test_a_rare_space_gives_every_placement_a_new_chair() -> None:
    history = [place(seat, inst("rare_winds"), "rare_winds") for seat in (ADA, BEN, ADA)]
    state = given(*history)
    assert state.spaces["rare_winds"].chairs == tuple(Seated(c.seat, c.token) for c in history)
    assert state.spaces["rare_winds"].chair is None
    assert state.spaces["rare_winds"].below == ()
    event = only_event(state, place(CY, inst("rare_winds"), "rare_winds"))
    assert isinstance(event, ChairClaimed)


# §5: the four chair cases, own tokens, ties, three-player majorities ----------------------------------

MONEY = {"money": 2}
INSPIRATION = {"inspiration": 1}
VIOLA_BONUS = {"money": 4}


def _claimed(seat: int, token: Token, bonus: dict[str, int] = VIOLA_BONUS) -> ChairClaimed:
    return ChairClaimed(seat=seat, space="viola", token=token, bonus=bonus, doubled=False)


def _stolen(
    seat: int, token: Token, from_seat: int, reason: str, bonus: dict[str, int] = VIOLA_BONUS
) -> Event:
    doubled = bonus != VIOLA_BONUS
    return ChairStolen(
        seat=seat,
        space="viola",
        token=token,
        bonus=bonus,
        from_seat=from_seat,
        reason=reason,  # type: ignore[arg-type]
        doubled=doubled,
    )


def _below(seat: int, token: Token, reason: str, consolation: dict[str, int] = MONEY) -> Event:
    return PlacedBelowLine(
        seat=seat,
        space="viola",
        token=token,
        consolation=consolation,
        reason=reason,  # type: ignore[arg-type]
    )


CHAIR_CASES = [
    # 1. Chair empty: the token takes it, the bonus is paid.
    pytest.param([], place(ADA, perf()), _claimed(ADA, perf()), id="empty-chair-performance-claims"),
    pytest.param([], place(ADA, rep()), _claimed(ADA, rep()), id="empty-chair-repair-claims"),
    pytest.param(
        [], place(ADA, inst("viola")), _claimed(ADA, inst("viola")), id="empty-chair-instrument-claims"
    ),
    # 2. Chair held by an instrument: below the line with the consolation, whatever comes.
    pytest.param(
        [place(BEN, inst("viola"))],
        place(ADA, perf()),
        _below(ADA, perf(), "instrument_holds"),
        id="instrument-holds-against-a-performance",
    ),
    pytest.param(
        [place(BEN, inst("viola")), place(ADA, rep()), place(ADA, rep())],
        place(ADA, rep(), consolation="inspiration"),
        _below(ADA, rep(), "instrument_holds", INSPIRATION),
        id="instrument-holds-against-any-majority",
    ),
    pytest.param(
        [place(BEN, inst("viola"))],
        place(ADA, inst("viola"), skill=10),
        _below(ADA, inst("viola"), "instrument_holds"),
        id="instrument-holds-against-another-instrument",
    ),
    pytest.param(
        [place(ADA, inst("viola"))],
        place(ADA, perf()),
        _below(ADA, perf(), "instrument_holds"),
        id="own-instrument-holds-against-own-performance",
    ),
    # 3. Chair held by a performance or repair, and the token is an instrument: it takes the chair.
    pytest.param(
        [place(BEN, perf())],
        place(ADA, inst("viola")),
        _stolen(ADA, inst("viola"), BEN, "instrument"),
        id="instrument-takes-a-performance-chair",
    ),
    pytest.param(
        [place(BEN, rep()), place(BEN, rep()), place(BEN, rep())],
        place(ADA, inst("viola")),
        _stolen(ADA, inst("viola"), BEN, "instrument"),
        id="instrument-takes-a-repair-chair-against-any-majority",
    ),
    pytest.param(
        [place(ADA, perf())],
        place(ADA, inst("viola")),
        _stolen(ADA, inst("viola"), ADA, "instrument"),
        id="instrument-displaces-its-owners-own-performance",
    ),
    # 4. Performance or repair against a performance or repair: a strict majority steals.
    pytest.param(
        [place(BEN, perf())],
        place(ADA, rep()),
        _below(ADA, rep(), "no_majority"),
        id="one-against-one-is-a-tie",
    ),
    pytest.param(
        [place(BEN, perf()), place(ADA, rep())],
        place(ADA, perf()),
        _stolen(ADA, perf(), BEN, "majority"),
        id="two-against-one-steals",
    ),
    pytest.param(
        [place(BEN, perf()), place(ADA, rep()), place(ADA, perf()), place(BEN, rep())],
        place(BEN, perf()),
        _stolen(BEN, perf(), ADA, "majority"),
        id="three-against-two-steals-back",
    ),
    pytest.param(
        [place(BEN, perf()), place(BEN, rep()), place(ADA, rep()), place(ADA, rep())],
        place(ADA, perf()),
        _stolen(ADA, perf(), BEN, "majority"),
        id="below-line-tokens-of-the-holder-count-for-the-holder",
    ),
    pytest.param(
        [place(ADA, perf())],
        place(ADA, perf()),
        _below(ADA, perf(), "own_chair"),
        id="performance-on-own-chair-goes-below",
    ),
    pytest.param(
        [place(ADA, rep()), place(ADA, rep()), place(ADA, rep())],
        place(ADA, perf(), consolation="inspiration"),
        _below(ADA, perf(), "own_chair", INSPIRATION),
        id="repair-on-own-chair-with-a-big-lead-still-goes-below",
    ),
]


@pytest.mark.parametrize(("history", "command", "expected"), CHAIR_CASES)
def test_a_placement_resolves_as_rules_section_5_says(
    history: list[Place], command: Place, expected: Event
) -> None:
    assert only_event(given(*history), command) == expected


TIES = [
    pytest.param([place(BEN, perf())], place(ADA, perf()), id="one-all"),
    pytest.param(
        [place(BEN, perf()), place(ADA, rep()), place(BEN, rep())], place(ADA, perf()), id="two-all"
    ),
    pytest.param(
        [place(BEN, perf()), place(ADA, rep()), place(BEN, rep()), place(ADA, rep()), place(BEN, rep())],
        place(ADA, rep()),
        id="three-all",
    ),
    pytest.param(
        [place(ADA, perf()), place(BEN, rep()), place(CY, rep()), place(CY, rep())],
        place(BEN, rep()),
        id="ties-the-holder-who-stole-with-two",
    ),
]


@pytest.mark.parametrize(("history", "command"), TIES)
def test_a_tie_never_steals_the_chair(history: list[Place], command: Place) -> None:
    state = given(*history)
    event = only_event(state, command)
    assert isinstance(event, PlacedBelowLine)
    assert event.reason == "no_majority"
    assert evolve(state, event).spaces["viola"].chair == state.spaces["viola"].chair


THREE_PLAYER = [
    pytest.param(
        [place(ADA, perf()), place(BEN, rep())],
        place(CY, rep()),
        ("no_majority", None),
        id="one-each-no-steal",
    ),
    pytest.param(
        [place(ADA, perf()), place(BEN, rep()), place(CY, rep())],
        place(CY, perf()),
        ("majority", ADA),
        id="two-over-one-and-one-steals-from-the-holder",
    ),
    pytest.param(
        [place(ADA, perf()), place(BEN, rep()), place(BEN, rep()), place(CY, rep())],
        place(CY, perf()),
        ("no_majority", None),
        id="two-ties-the-holder-who-stole-with-two",
    ),
    pytest.param(
        [place(ADA, perf()), place(BEN, rep()), place(BEN, perf()), place(CY, rep()), place(CY, rep())],
        place(CY, rep()),
        ("majority", BEN),
        id="three-over-two-and-one-steals-from-the-second-holder",
    ),
    pytest.param(
        [place(ADA, perf()), place(ADA, rep()), place(BEN, rep()), place(CY, rep())],
        place(CY, perf()),
        ("no_majority", None),
        id="two-ties-the-first-holder-with-two",
    ),
    pytest.param(
        [place(ADA, perf()), place(BEN, rep()), place(CY, rep())],
        place(ADA, rep()),
        ("own_chair", None),
        id="the-holder-adds-below-on-own-chair",
    ),
]


@pytest.mark.parametrize(("history", "command", "expected"), THREE_PLAYER)
def test_with_three_players_a_steal_needs_more_tokens_than_every_other_player(
    history: list[Place], command: Place, expected: tuple[str, int | None]
) -> None:
    event = only_event(given(*history), command)
    reason, from_seat = expected
    if from_seat is None:
        assert isinstance(event, PlacedBelowLine)
        assert event.reason == reason
    else:
        assert isinstance(event, ChairStolen)
        assert (event.reason, event.from_seat) == (reason, from_seat)


def _facts(*events: Event, players: int = 3) -> Game:
    return functools.reduce(evolve, events, start(players))


def _fact_below(seat: int, token: Token) -> Event:
    return PlacedBelowLine(seat=seat, space="viola", token=token, consolation=MONEY, reason="no_majority")


# In legal play the holder of a performance or repair chair always has at least as many tokens there as
# anyone (a chair is only ever taken with a strict majority), so beating the holder while only tying a
# third player needs a history written as facts: evolve is total and replays whatever the stream holds.
CRAFTED = [
    pytest.param(
        [_claimed(ADA, perf()), _fact_below(BEN, rep()), _fact_below(BEN, rep()), _fact_below(CY, rep())],
        place(CY, rep()),
        ("no_majority", None),
        id="beats-the-holder-but-ties-a-third-player",
    ),
    pytest.param(
        [_claimed(ADA, perf()), _fact_below(BEN, rep()), _fact_below(BEN, rep()), _fact_below(BEN, rep())],
        place(CY, rep()),
        ("no_majority", None),
        id="ties-the-holder-while-a-third-player-leads",
    ),
    pytest.param(
        [_claimed(ADA, perf()), _fact_below(BEN, rep()), _fact_below(CY, rep()), _fact_below(CY, rep())],
        place(CY, rep()),
        ("majority", ADA),
        id="beats-the-holder-and-the-third-player",
    ),
    pytest.param(
        [_claimed(ADA, perf()), _fact_below(BEN, inst("viola")), _fact_below(BEN, inst("viola"))],
        place(BEN, rep()),
        ("no_majority", None),
        id="instruments-below-the-line-never-count",
    ),
]


@pytest.mark.parametrize(("history", "command", "expected"), CRAFTED)
def test_a_steal_needs_more_tokens_than_every_other_player_not_just_the_holder(
    history: list[Event], command: Place, expected: tuple[str, int | None]
) -> None:
    event = only_event(_facts(*history), command)
    reason, from_seat = expected
    assert getattr(event, "reason", None) == reason
    assert getattr(event, "from_seat", None) == from_seat


def test_with_four_players_a_steal_needs_more_tokens_than_each_of_the_three_others() -> None:
    # Seat 1 holds the chair with 2 tokens, seat 2 has 2, seats 0 and 3 have 1 each.
    history = [
        place(0, perf()),
        place(1, rep()),
        place(2, rep()),
        place(3, rep()),
        place(1, rep()),
        place(2, rep()),
    ]
    state = given(*history, players=4)
    assert state.spaces["viola"].chair == Seated(1, rep())
    tie = only_event(state, place(3, rep()))
    assert isinstance(tie, PlacedBelowLine)
    assert tie.reason == "no_majority"
    event = only_event(state, place(2, rep()))
    assert isinstance(event, ChairStolen)
    assert event.from_seat == 1


def test_tokens_in_other_spaces_do_not_count_toward_a_majority() -> None:
    state = given(place(ADA, perf()), place(BEN, perf(), "clarinet"), place(BEN, rep(), "violin_bc"))
    event = only_event(state, place(BEN, rep()))
    assert isinstance(event, PlacedBelowLine)
    assert event.reason == "no_majority"


def test_the_two_violin_spaces_are_counted_separately() -> None:
    state = given(place(ADA, perf(), "violin_bc"), place(BEN, perf(), "violin_cr"))
    event = only_event(state, place(BEN, rep(), "violin_bc"))
    assert isinstance(event, PlacedBelowLine)
    assert event.reason == "no_majority"


def test_a_stolen_chair_moves_the_holder_below_the_line_after_the_older_tokens() -> None:
    state = given(place(BEN, perf()), place(ADA, rep()), place(ADA, perf()))
    assert state.spaces["viola"].chair == Seated(ADA, perf())
    assert state.spaces["viola"].below == (Seated(ADA, rep()), Seated(BEN, perf()))


def test_an_instrument_in_a_chair_never_leaves() -> None:
    state = given(place(CY, inst("viola")))
    for command in [
        place(ADA, perf()),
        place(ADA, perf()),
        place(ADA, rep()),
        place(BEN, inst("viola"), skill=9),
    ]:
        state = evolve(state, only_event(state, command))
        assert state.spaces["viola"].chair == Seated(CY, inst("viola"))


def test_nothing_gained_is_taken_back_when_a_token_goes_below_the_line() -> None:
    state = given(place(ADA, perf()))
    assert state.resources[ADA] == {"money": 4}
    state = given(place(ADA, perf()), place(BEN, rep()), place(BEN, perf()), place(CY, inst("viola")))
    assert state.resources == ({"money": 4}, {"money": 6}, {"money": 4})


# Consolation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("consolation", "gained"),
    [
        pytest.param(None, {"money": 2}, id="omitted-gives-two-money"),
        pytest.param("money", {"money": 2}, id="money-gives-two-money"),
        pytest.param("inspiration", {"inspiration": 1}, id="inspiration-gives-one-inspiration"),
    ],
)
def test_the_consolation_is_the_players_choice_and_defaults_to_money(
    consolation: Consolation | None, gained: dict[str, int]
) -> None:
    state = given(place(BEN, perf()))
    if consolation is None:
        command = Place(seat=ADA, id="c-default", token=rep(), space="viola")
    else:
        command = place(ADA, rep(), consolation=consolation)
    event = only_event(state, command)
    assert isinstance(event, PlacedBelowLine)
    assert event.consolation == gained
    assert evolve(state, event).resources[ADA] == gained


def test_a_claimed_chair_pays_the_bonus_not_the_chosen_consolation() -> None:
    event = only_event(start(), place(ADA, perf(), consolation="inspiration"))
    assert isinstance(event, ChairClaimed)
    assert event.bonus == {"money": 4}


# Doubling ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("skill", "doubled"), [pytest.param(skill, skill >= 6, id=f"skill-{skill}") for skill in range(1, 11)]
)
def test_an_instrument_chair_bonus_is_doubled_from_skill_6(skill: int, doubled: bool) -> None:
    event = only_event(start(), place(ADA, inst("cello"), "cello", skill=skill))
    assert isinstance(event, ChairClaimed)
    factor = 2 if doubled else 1
    assert event.bonus == {"money": factor, "wood": factor, "animal": factor}
    assert event.doubled is doubled


@pytest.mark.parametrize(
    ("space", "bonus"),
    [
        pytest.param("rare_winds", {"money": 2, "inspiration": 2, "apprentice": 2}, id="rare-winds"),
        pytest.param(
            "rare_percussion_keyboards",
            {"money": 2, "inspiration": 2, "instrument_card": 2},
            id="rare-percussion-keyboards",
        ),
    ],
)
def test_a_rare_chair_bonus_is_doubled_too(space: str, bonus: dict[str, int]) -> None:
    event = only_event(start(), place(ADA, inst(space), space, skill=6))
    assert event == ChairClaimed(seat=ADA, space=space, token=inst(space), bonus=bonus, doubled=True)


def test_an_instrument_stealing_a_chair_gets_the_doubled_bonus() -> None:
    event = only_event(given(place(BEN, perf())), place(ADA, inst("viola"), skill=6))
    assert isinstance(event, ChairStolen)
    assert (event.bonus, event.doubled) == ({"money": 8}, True)


@pytest.mark.parametrize(
    ("consolation", "gained"),
    [
        pytest.param("money", {"money": 2}, id="money"),
        pytest.param("inspiration", {"inspiration": 1}, id="inspiration"),
    ],
)
def test_the_consolation_is_never_doubled(consolation: Consolation, gained: dict[str, int]) -> None:
    state = given(place(BEN, inst("viola")))
    event = only_event(state, place(ADA, inst("viola"), skill=10, consolation=consolation))
    assert isinstance(event, PlacedBelowLine)
    assert event.consolation == gained


@pytest.mark.parametrize(
    ("history", "command"),
    [
        pytest.param([], place(ADA, perf(), skill=10), id="performance-claiming"),
        pytest.param([], place(ADA, rep(), skill=6), id="repair-claiming"),
        pytest.param(
            [place(BEN, perf()), place(ADA, rep())], place(ADA, perf(), skill=9), id="performance-stealing"
        ),
        pytest.param(
            [place(BEN, perf()), place(ADA, perf())], place(ADA, rep(), skill=7), id="repair-stealing"
        ),
    ],
)
def test_a_performance_or_repair_bonus_is_never_doubled(history: list[Place], command: Place) -> None:
    event = only_event(given(*history), command)
    assert isinstance(event, ChairClaimed | ChairStolen)
    assert event.bonus == {"money": 4}
    assert event.doubled is False


# Rare Strings materials ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("skill", "materials", "bonus"),
    [
        pytest.param(1, ("wood",), {"money": 1, "inspiration": 1, "wood": 1}, id="one-material"),
        pytest.param(5, ("animal",), {"money": 1, "inspiration": 1, "animal": 1}, id="one-material-skill-5"),
        pytest.param(
            6, ("wood", "metal"), {"money": 2, "inspiration": 2, "wood": 1, "metal": 1}, id="two-when-doubled"
        ),
        pytest.param(
            10,
            ("animal", "animal"),
            {"money": 2, "inspiration": 2, "animal": 2},
            id="the-same-material-twice",
        ),
    ],
)
def test_a_rare_strings_chair_pays_the_named_materials(
    skill: int, materials: tuple[Material, ...], bonus: dict[str, int]
) -> None:
    command = place(ADA, inst("rare_strings"), "rare_strings", skill=skill, materials=materials)
    event = only_event(start(), command)
    assert isinstance(event, ChairClaimed)
    assert event.bonus == bonus
    assert evolve(start(), event).resources[ADA] == bonus


@pytest.mark.parametrize(
    ("skill", "materials"),
    [
        pytest.param(1, None, id="omitted"),
        pytest.param(1, (), id="empty-list"),
        pytest.param(6, None, id="omitted-when-doubled"),
        pytest.param(6, (), id="empty-list-when-doubled"),
    ],
)
def test_a_rare_strings_placement_without_materials_is_missing_choice(
    skill: int, materials: tuple[Material, ...] | None
) -> None:
    command = place(ADA, inst("rare_strings"), "rare_strings", skill=skill, materials=materials)
    with pytest.raises(MissingChoice) as caught:
        decide(start(), command)
    assert caught.value.code == "missing_choice"
    assert "rare_strings" in caught.value.message
    assert "wood, metal or animal" in caught.value.message


@pytest.mark.parametrize(
    ("token", "space", "skill", "materials"),
    [
        pytest.param(inst("viola"), "viola", 1, ("wood",), id="materials-on-a-standard-space"),
        pytest.param(rep(), "viola", 1, ("wood",), id="materials-on-a-repair"),
        pytest.param(
            inst("rare_winds"), "rare_winds", 6, ("wood", "metal"), id="materials-on-another-rare-space"
        ),
        pytest.param(inst("rare_strings"), "rare_strings", 1, ("wood", "metal"), id="two-when-not-doubled"),
        pytest.param(inst("rare_strings"), "rare_strings", 6, ("wood",), id="one-when-doubled"),
        pytest.param(
            inst("rare_strings"), "rare_strings", 6, ("wood", "wood", "wood"), id="three-when-doubled"
        ),
    ],
)
def test_materials_elsewhere_or_in_the_wrong_number_are_a_bad_request(
    token: Token, space: str, skill: int, materials: tuple[Material, ...]
) -> None:
    with pytest.raises(BadRequest) as caught:
        decide(start(), place(ADA, token, space, skill=skill, materials=materials))
    assert caught.value.code == "bad_request"
    assert space in caught.value.message
