"""Random games against an independent, deliberately plain restatement of rules.md §4, §5, §7 and §9.

The oracle below keeps, per space, a list of (seat, kind) and decides each placement itself; for a
take-back it keeps a copy of its whole state before each placement. It reads the layout's data
(instrument, family, eras, bonus, prestige of each space) but calls nothing of domain.rules or
domain.game: if both agree on thousands of random placements, neither is likely to be wrong the same way.
"""

from __future__ import annotations

import copy
import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

import domain
from domain import (
    STANDARD,
    ChairClaimed,
    ChairStolen,
    CreateGame,
    EndGame,
    GameEnded,
    InstrumentToken,
    LimitReached,
    PerformanceToken,
    Place,
    PlacedBelowLine,
    PlacementTakenBack,
    Rejected,
    RepairToken,
    TakeBack,
    Token,
    decide,
    evolve,
)
from projections import (
    Board,
    ChairSpaceAdded,
    ChairSpaceView,
    RareSpaceAdded,
    RareSpaceView,
    added,
    apply,
    project,
    render,
    view_at,
)

NAMES = ("Ada", "Ben", "Cy", "Di")
SPACES = {space.id: space for space in STANDARD.spaces}
SPACE_IDS = tuple(SPACES)
ERAS = ("baroque", "classical", "romantic")
FAMILIES = ("strings", "winds", "percussion_keyboards")
MATERIALS = ("wood", "metal", "animal")
INSTRUMENTS = tuple(dict.fromkeys(space.instrument for space in STANDARD.spaces))
ANY_TOKEN: tuple[Token, ...] = (
    *(InstrumentToken(instrument=name) for name in (*INSTRUMENTS, "tuba")),
    *(PerformanceToken(era=era) for era in ERAS),  # type: ignore[arg-type]
    *(RepairToken(family=family) for family in FAMILIES),  # type: ignore[arg-type]
)
# Busy spaces make chairs change hands; every space and an unknown one appear too.
SPACE_CHOICES = (*(["viola"] * 12), *(["violin_bc"] * 4), *(["rare_strings"] * 2), *SPACE_IDS, "tuba")


# The oracle -------------------------------------------------------------------------------------------


def kind_of(token: Token) -> str:
    if isinstance(token, InstrumentToken):
        return "instrument"
    if isinstance(token, PerformanceToken):
        return "performance"
    return "repair"


@dataclass
class Outcome:
    """What the oracle expects: a rejection code, or one event's type, reason, from_seat and gains."""

    code: str | None = None
    event: str | None = None
    reason: str | None = None
    from_seat: int | None = None
    gains: dict[str, int] = field(default_factory=dict)


@dataclass
class Oracle:
    players: int
    max_placements: int
    version: int = 1
    placements: int = 0
    ended: bool = False
    chair: dict[str, tuple[int, str] | None] = field(default_factory=lambda: dict.fromkeys(SPACE_IDS))
    below: dict[str, list[tuple[int, str]]] = field(default_factory=lambda: {s: [] for s in SPACE_IDS})
    rare_chairs: dict[str, list[int]] = field(default_factory=lambda: {s: [] for s in SPACE_IDS})
    resources: list[Counter[str]] = field(default_factory=list)
    # While the last accepted command is a placement: its seat and a copy of the board before it.
    last_placement: tuple[int, Any] | None = None

    def __post_init__(self) -> None:
        self.resources = [Counter() for _ in range(self.players)]

    def board(self) -> Any:
        """The whole board: what a take-back restores, and what a domain state is compared with."""
        return copy.deepcopy((self.chair, self.below, self.rare_chairs, [+r for r in self.resources]))

    def expect(self, command: domain.Command) -> Outcome:
        if isinstance(command, EndGame):
            return self._expect_end(command)
        if isinstance(command, TakeBack):
            return self._expect_take_back(command)
        assert isinstance(command, Place)
        token = command.token
        kind = kind_of(token)
        if command.space not in SPACES:
            return Outcome(code="bad_request")
        space = SPACES[command.space]
        if isinstance(token, InstrumentToken) and token.instrument not in INSTRUMENTS:
            return Outcome(code="bad_request")
        doubled = kind == "instrument" and command.skill >= 6
        needed = space.bonus.get("material_choice", 0) * (2 if doubled else 1)
        chosen = command.materials or ()
        if command.materials is not None and needed == 0:
            return Outcome(code="bad_request")  # any materials field, even empty, where none is paid
        if chosen and len(chosen) != needed:
            return Outcome(code="bad_request")
        if command.seat >= self.players:
            return Outcome(code="forbidden")
        if self.ended:
            return Outcome(code="game_over")
        if command.expected_version is not None and command.expected_version != self.version:
            return Outcome(code="stale_version")
        if self.placements >= self.max_placements:
            return Outcome(code="limit_reached")
        if isinstance(token, InstrumentToken):
            allowed = space.instrument == token.instrument
        elif isinstance(token, PerformanceToken):
            allowed = token.era in space.eras
        else:
            allowed = token.family == space.family and len(space.eras) > 0
        if not allowed:
            return Outcome(code="illegal_space")
        if needed and not chosen:
            return Outcome(code="missing_choice")

        bonus: Counter[str] = Counter()
        for key, amount in space.bonus.items():
            if key != "material_choice":
                bonus[key] += amount * (2 if doubled else 1)
        for material in chosen:
            bonus[material] += 1
        consolation = {"money": 2} if command.consolation == "money" else {"inspiration": 1}
        seat = command.seat
        if not space.eras:
            return Outcome(event="ChairClaimed", gains=dict(bonus))
        holder = self.chair[space.id]
        if holder is None:
            return Outcome(event="ChairClaimed", gains=dict(bonus))
        if holder[1] == "instrument":
            return Outcome(event="PlacedBelowLine", reason="instrument_holds", gains=consolation)
        if kind == "instrument":
            return Outcome(event="ChairStolen", reason="instrument", from_seat=holder[0], gains=dict(bonus))
        if holder[0] == seat:
            return Outcome(event="PlacedBelowLine", reason="own_chair", gains=consolation)
        count = Counter(who for who, what in [holder, *self.below[space.id]] if what != "instrument")
        count[seat] += 1
        if all(count[seat] > count[other] for other in range(self.players) if other != seat):
            return Outcome(event="ChairStolen", reason="majority", from_seat=holder[0], gains=dict(bonus))
        return Outcome(event="PlacedBelowLine", reason="no_majority", gains=consolation)

    def _expect_end(self, command: EndGame) -> Outcome:
        if command.seat >= self.players or command.seat != 0:
            return Outcome(code="forbidden")
        if self.ended:
            return Outcome(code="game_over")
        if command.expected_version is not None and command.expected_version != self.version:
            return Outcome(code="stale_version")
        return Outcome(event="GameEnded")

    def _expect_take_back(self, command: TakeBack) -> Outcome:
        if command.seat >= self.players:
            return Outcome(code="forbidden")
        if self.ended:
            return Outcome(code="game_over")
        if command.expected_version is not None and command.expected_version != self.version:
            return Outcome(code="stale_version")
        if self.placements >= self.max_placements:
            return Outcome(code="limit_reached")
        if self.last_placement is None or self.last_placement[0] != command.seat:
            return Outcome(code="cannot_take_back")
        return Outcome(event="PlacementTakenBack")

    def accept(self, command: domain.Command, outcome: Outcome) -> None:
        self.version += 1
        if isinstance(command, EndGame):
            self.ended = True
            self.last_placement = None
            return
        if isinstance(command, TakeBack):
            assert self.last_placement is not None
            self.chair, self.below, self.rare_chairs, resources = self.last_placement[1]
            self.resources = [Counter(r) for r in resources]
            self.placements += 1
            self.last_placement = None
            return
        assert isinstance(command, Place)
        seat, space_id, kind = command.seat, command.space, kind_of(command.token)
        self.last_placement = (seat, self.board())
        self.placements += 1
        self.resources[seat].update(outcome.gains)
        if not SPACES[space_id].eras:
            self.rare_chairs[space_id].append(seat)
        elif outcome.event == "ChairClaimed":
            self.chair[space_id] = (seat, kind)
        elif outcome.event == "ChairStolen":
            old = self.chair[space_id]
            assert old is not None
            self.below[space_id].append(old)
            self.chair[space_id] = (seat, kind)
        else:
            self.below[space_id].append((seat, kind))

    @staticmethod
    def board_of(game: domain.Game) -> Any:
        """A domain state in the oracle's terms, to compare with `board()`."""
        chair: dict[str, tuple[int, str] | None] = {}
        below: dict[str, list[tuple[int, str]]] = {}
        rare: dict[str, list[int]] = {}
        for space_id, held in game.spaces.items():
            chair[space_id] = None if held.chair is None else (held.chair.seat, kind_of(held.chair.token))
            below[space_id] = [(t.seat, kind_of(t.token)) for t in held.below]
            rare[space_id] = [t.seat for t in held.chairs]
        return (chair, below, rare, [dict(r) for r in game.resources])

    def final_scores(self) -> list[tuple[int, tuple[str, ...], int, dict[str, int]]]:
        result = []
        for seat in range(self.players):
            chairs: list[str] = []
            for space in STANDARD.spaces:
                if space.eras:
                    holder = self.chair[space.id]
                    chairs += [space.id] if holder is not None and holder[0] == seat else []
                else:
                    chairs += [space.id] * self.rare_chairs[space.id].count(seat)
            prestige = sum(SPACES[c].prestige for c in chairs)
            result.append((seat, tuple(chairs), prestige, dict(+self.resources[seat])))
        return result


# Random games ------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One command of a game: the state before it, what the domain answered, the state after."""

    command: domain.Command
    before: domain.Game
    events: list[domain.Event]
    code: str | None
    after: domain.Game
    expected: Outcome
    oracle_before: Any
    oracle_after: Any


@dataclass
class Played:
    steps: list[Step]
    events: list[domain.Event]
    commands: list[domain.Command]
    final: domain.Game
    oracle: Oracle


@st.composite
def games(draw: st.DrawFn) -> Played:
    players = draw(st.sampled_from([1, 2, 2, 3, 3, 3, 4, 4]))
    max_placements = draw(st.sampled_from([1000] * 7 + [8]))
    create = CreateGame(game_id="g", players=NAMES[:players], max_placements=max_placements)
    state = domain.Game()
    events = decide(state, create)
    state = functools.reduce(evolve, events, state)
    oracle = Oracle(players, max_placements)
    steps: list[Step] = []
    commands: list[domain.Command] = [create]
    # A crowded game plays mostly performances and repairs into two spaces, so majorities are contested.
    crowded = draw(st.booleans())
    for number in range(draw(st.integers(0, 40))):
        command = draw(commands_for(players, state.version, f"c-{number}", crowded))
        expected = oracle.expect(command)
        oracle_before = oracle.board()
        try:
            new = decide(state, command)
            code = None
        except Rejected as exc:
            new, code = [], exc.code
        after = functools.reduce(evolve, new, state)
        if code is None:
            oracle.accept(command, expected)
            events += new
            commands.append(command)
        steps.append(Step(command, state, new, code, after, expected, oracle_before, oracle.board()))
        state = after
    return Played(steps, events, commands, state, oracle)


@st.composite
def commands_for(
    draw: st.DrawFn, players: int, version: int, command_id: str, crowded: bool
) -> domain.Command:
    # Weights by repetition: mostly seated players, current or no expected_version, tokens that fit.
    seat = draw(st.sampled_from([*range(players)] * 12 + [0, 1, 2, 3]))
    expected_version = draw(st.sampled_from([None] * 8 + [version] * 3 + [version - 1]))
    what = draw(st.sampled_from(["place"] * 70 + ["take_back"] * 9 + ["end"]))
    if what == "end":
        return EndGame(seat=seat, id=command_id, expected_version=expected_version)
    if what == "take_back":
        return TakeBack(seat=seat, id=command_id, expected_version=expected_version)
    space_id = draw(st.sampled_from(["viola", "violin_cr"] if crowded else SPACE_CHOICES))
    if space_id in SPACES and draw(st.sampled_from([True] * 9 + [False])):
        space = SPACES[space_id]
        fitting: list[Token] = [InstrumentToken(instrument=space.instrument)]
        if space.eras:
            weight = 12 if crowded else 6
            fitting += [
                PerformanceToken(era=era) for era in space.eras for _ in range(weight // len(space.eras))
            ]
            fitting += [RepairToken(family=space.family)] * weight
        token = draw(st.sampled_from(fitting))
    else:
        token = draw(st.sampled_from(ANY_TOKEN))
    skill = draw(st.integers(1, 10))
    materials_mode = draw(st.sampled_from(["fit"] * 12 + ["none", "empty", "any"]))
    materials: tuple[str, ...] | None
    if materials_mode == "fit":
        per_chair = SPACES[space_id].bonus.get("material_choice", 0) if space_id in SPACES else 0
        count = per_chair * (2 if isinstance(token, InstrumentToken) and skill >= 6 else 1)
        materials = tuple(draw(st.lists(st.sampled_from(MATERIALS), min_size=count, max_size=count))) or None
    elif materials_mode == "none":
        materials = None
    elif materials_mode == "empty":
        materials = ()
    else:
        materials = tuple(draw(st.lists(st.sampled_from(MATERIALS), max_size=3)))
    return Place(
        seat=seat,
        id=command_id,
        token=token,
        space=space_id,
        skill=skill,
        consolation=draw(st.sampled_from(["money", "inspiration"])),
        materials=materials,  # type: ignore[arg-type]
        expected_version=expected_version,
    )


GAMES = games()
FEW = settings(max_examples=80, deadline=None)


# Properties ------------------------------------------------------------------------------------------
# Each is a check of one played game; the tests at the end run them in three groups, every check of a
# group on the same 80 games. Drawing and playing a game costs far more than any check of it.


def the_domain_decides_every_command_as_the_plain_oracle_does(played: Played) -> None:
    for step in played.steps:
        expected = step.expected
        if expected.code is not None:
            assert step.code == expected.code, step.command
            assert step.after is step.before
            continue
        assert step.code is None, step.command
        (event,) = step.events
        assert type(event).__name__ == expected.event
        if isinstance(event, PlacementTakenBack):
            assert isinstance(step.command, TakeBack)
            assert event == PlacementTakenBack(seat=step.command.seat, version=step.before.version)
        assert getattr(event, "reason", None) == expected.reason
        assert getattr(event, "from_seat", None) == expected.from_seat
        if isinstance(event, ChairClaimed | ChairStolen):
            assert event.bonus == expected.gains
        elif isinstance(event, PlacedBelowLine):
            assert event.consolation == expected.gains


def the_final_scores_match_the_oracle_and_rank_by_prestige(played: Played) -> None:
    final = domain.scores(played.final)
    assert [(s.seat, s.chairs, s.prestige, s.resources) for s in final] == played.oracle.final_scores()
    ranks = domain.ranking(final)
    for entry in ranks:
        assert entry.rank == 1 + sum(s.prestige > entry.prestige for s in final)
    assert [r.prestige for r in ranks] == sorted((s.prestige for s in final), reverse=True)
    ended = [e for e in played.events if isinstance(e, GameEnded)]
    assert len(ended) <= 1
    if ended:
        assert played.events[-1] is ended[0]
        assert ended[0].scores == final


def the_board_after_every_command_is_the_oracles(played: Played) -> None:
    for step in played.steps:
        assert Oracle.board_of(step.after) == step.oracle_after, step.command


def taken_back(step: Step) -> bool:
    return any(isinstance(event, PlacementTakenBack) for event in step.events)


def an_instrument_in_a_chair_never_leaves_unless_its_placement_is_taken_back(played: Played) -> None:
    for step in played.steps:
        if taken_back(step):
            continue
        for space_id, held in step.before.spaces.items():
            if held.chair is not None and isinstance(held.chair.token, InstrumentToken):
                assert step.after.spaces[space_id].chair == held.chair


def every_standard_space_has_at_most_one_chair_holder(played: Played) -> None:
    for step in played.steps:
        chairs = [c for score in domain.scores(step.after) for c in score.chairs if SPACES[c].eras]
        assert len(chairs) == len(set(chairs))
        for space_id, held in step.after.spaces.items():
            if SPACES[space_id].eras:
                assert held.chairs == ()
            else:
                assert held.chair is None
                assert held.below == ()


def a_steal_by_majority_happens_only_with_a_strict_majority(played: Played) -> None:
    for step in played.steps:
        for event in step.events:
            if isinstance(event, ChairStolen) and event.reason == "majority":
                held = step.before.spaces[event.space]
                assert held.chair is not None
                tokens = [held.chair, *held.below]
                count = Counter(s.seat for s in tokens if not isinstance(s.token, InstrumentToken))
                count[event.seat] += 1
                others = [count[seat] for seat in range(len(played.final.players)) if seat != event.seat]
                assert all(count[event.seat] > other for other in others)
                assert held.chair.seat != event.seat


def tokens_never_leave_the_orchestra_nor_change_space_unless_taken_back(played: Played) -> None:
    for step in played.steps:
        if taken_back(step):
            continue
        for space_id, held in step.before.spaces.items():
            after = step.after.spaces[space_id]
            before_tokens = Counter([*held.chairs, *held.below, *([held.chair] if held.chair else [])])
            after_tokens = Counter([*after.chairs, *after.below, *([after.chair] if after.chair else [])])
            assert not before_tokens - after_tokens
            placed_here = [e for e in step.events if getattr(e, "space", None) == space_id]
            assert sum(after_tokens.values()) == sum(before_tokens.values()) + len(placed_here)


def resources_only_grow_unless_a_placement_is_taken_back(played: Played) -> None:
    for step in played.steps:
        if taken_back(step):
            continue
        for before, after in zip(step.before.resources, step.after.resources, strict=True):
            assert all(after.get(key, 0) >= amount for key, amount in before.items())
            assert all(amount > 0 for amount in after.values())


def folding_the_events_again_gives_the_same_state(played: Played) -> None:
    assert functools.reduce(evolve, played.events, domain.Game()) == played.final
    assert played.final.version == len(played.events)


def the_one_pass_fold_equals_evolving_event_by_event_from_any_start(
    played: Played, data: st.DataObject
) -> None:
    """`fold` is the replay fast path; it must never drift from `evolve`."""
    assert domain.fold(played.events) == played.final
    split = data.draw(st.integers(0, len(played.events)))
    start = functools.reduce(evolve, played.events[:split], domain.Game())
    assert domain.fold(played.events[split:], start) == played.final


def the_incremental_view_equals_the_rendered_and_the_projected_view(played: Played) -> None:
    board = Board()
    for event in played.events:
        board = apply(board, event)
        assert board.view == render(board.game)
    assert board.game == played.final
    assert board.view == render(played.final)
    assert board.view == project(played.events).view


def between_any_two_versions_every_space_changes_only_at_its_end(played: Played, data: st.DataObject) -> None:
    """What makes a view delta exact: each space's list cut where the addition starts, and its tokens
    appended, give the later view's space; without a take-back between them, nothing is cut."""
    at = sorted(data.draw(st.lists(st.integers(1, len(played.events)), min_size=2, max_size=2)))
    early, late = view_at(played.events, at[0]), view_at(played.events, at[1])
    cut = any(isinstance(event, PlacementTakenBack) for event in played.events[at[0] : at[1]])
    assert list(early.spaces) == list(late.spaces)
    for space_id, space in late.spaces.items():
        addition = added(early.spaces[space_id], space)
        before = early.spaces[space_id]
        if isinstance(space, ChairSpaceView):
            assert isinstance(before, ChairSpaceView) and isinstance(addition, ChairSpaceAdded)
            assert addition.below_from == len(before.below) or cut
            assert list(before.below[: addition.below_from]) + list(addition.below) == list(space.below)
            assert addition.chair == space.chair
        else:
            assert isinstance(before, RareSpaceView) and isinstance(addition, RareSpaceAdded)
            assert addition.chairs_from == len(before.chairs) or cut
            assert list(before.chairs[: addition.chairs_from]) + list(addition.chairs) == list(space.chairs)


def view_at_n_is_the_view_after_n_events(played: Played) -> None:
    board = Board()
    assert view_at(played.events, 0) == board.view
    for number, event in enumerate(played.events, start=1):
        board = apply(board, event)
        assert view_at(played.events, number) == board.view


def every_event_and_command_survives_a_json_round_trip(played: Played) -> None:
    for event in played.events:
        assert msgspec.json.decode(msgspec.json.encode(event), type=domain.Event) == event
    for command in played.commands:
        assert msgspec.json.decode(msgspec.json.encode(command), type=domain.Command) == command
    log = msgspec.json.decode(msgspec.json.encode(played.events), type=list[domain.Event])
    assert log == played.events


def a_placement_then_its_take_back_is_the_game_without_the_placement(played: Played) -> None:
    """Whatever the game, any accepted placement taken back at once leaves the same state, view and
    scores as if it had never been made: the oracle's board before it, the domain's view before it."""
    for step in played.steps:
        if step.code is not None or not isinstance(step.command, Place):
            continue
        undo = TakeBack(seat=step.command.seat, id="undo")
        if step.after.placements >= step.after.max_placements:  # a take-back counts toward the limit
            with pytest.raises(LimitReached):
                decide(step.after, undo)
            continue
        (event,) = decide(step.after, undo)
        assert event == PlacementTakenBack(seat=step.command.seat, version=step.after.version)
        after = evolve(step.after, event)
        assert Oracle.board_of(after) == step.oracle_before
        assert domain.scores(after) == domain.scores(step.before)
        version = step.before.version + 2
        unplaced = replace(step.before, version=version, placements=step.before.placements + 2, undo=None)
        assert after == unplaced
        assert render(after) == replace(render(step.before), version=version)
        board = apply(Board(step.after, render(step.after)), event)
        assert board.view == render(after)
        assert domain.fold([*step.events, event], step.before) == after


# The tests -------------------------------------------------------------------------------------------


@FEW
@given(GAMES)
def test_the_domain_agrees_with_the_plain_oracle(played: Played) -> None:
    the_domain_decides_every_command_as_the_plain_oracle_does(played)
    the_final_scores_match_the_oracle_and_rank_by_prestige(played)
    the_board_after_every_command_is_the_oracles(played)
    a_placement_then_its_take_back_is_the_game_without_the_placement(played)


@FEW
@given(GAMES)
def test_every_step_keeps_the_rules_invariants(played: Played) -> None:
    an_instrument_in_a_chair_never_leaves_unless_its_placement_is_taken_back(played)
    every_standard_space_has_at_most_one_chair_holder(played)
    a_steal_by_majority_happens_only_with_a_strict_majority(played)
    tokens_never_leave_the_orchestra_nor_change_space_unless_taken_back(played)
    resources_only_grow_unless_a_placement_is_taken_back(played)


@FEW
@given(GAMES, st.data())
def test_every_fold_view_and_encoding_of_a_game_agrees(played: Played, data: st.DataObject) -> None:
    folding_the_events_again_gives_the_same_state(played)
    the_one_pass_fold_equals_evolving_event_by_event_from_any_start(played, data)
    the_incremental_view_equals_the_rendered_and_the_projected_view(played)
    between_any_two_versions_every_space_changes_only_at_its_end(played, data)
    view_at_n_is_the_view_after_n_events(played)
    every_event_and_command_survives_a_json_round_trip(played)
