"""What changed between two views (a live frame's `view_delta`): only what changed, and exactly that."""

from __future__ import annotations

import functools
from collections import Counter

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from domain import (
    CreateGame,
    EndGame,
    Game,
    InstrumentToken,
    PerformanceToken,
    Place,
    Rejected,
    Score,
    Seated,
    TakeBack,
    decide,
)
from orchestra_client import apply_delta
from projections import (
    Board,
    ChairSpaceAdded,
    ChairSpaceView,
    RareSpaceAdded,
    RareSpaceView,
    ScoreChange,
    View,
    ViewDelta,
    added,
    apply,
    render,
    view_delta,
)
from tests.support.commands import commands

A = Seated(0, PerformanceToken("classical"))
B = Seated(1, PerformanceToken("baroque"))
C = Seated(2, InstrumentToken("viola"))


def test_a_standard_space_gains_its_new_chair_and_the_tokens_appended_below() -> None:
    before = ChairSpaceView(chair=A, below=(B,))
    after = ChairSpaceView(chair=C, below=(B, A))
    assert added(before, after) == ChairSpaceAdded(chair=C, below_from=1, below=(A,))
    assert added(after, after) == ChairSpaceAdded(chair=C, below_from=2, below=())


def test_a_rare_space_gains_the_chairs_appended() -> None:
    before = RareSpaceView(chairs=(A,))
    assert added(before, RareSpaceView(chairs=(A, C, B))) == RareSpaceAdded(chairs_from=1, chairs=(C, B))


def test_a_list_cut_short_names_where_it_is_cut_and_what_follows() -> None:
    standard = ChairSpaceView(chair=C, below=(A, B))
    rare = RareSpaceView(chairs=(A, B))
    # A take-back: the last token leaves, the chair goes back to the token that held it.
    assert added(standard, ChairSpaceView(chair=B, below=(A,))) == ChairSpaceAdded(B, 1, ())
    assert added(rare, RareSpaceView(chairs=(A,))) == RareSpaceAdded(1, ())
    # Taken back then placed again within one frame: cut, then appended.
    assert added(standard, ChairSpaceView(chair=C, below=(A, C))) == ChairSpaceAdded(C, 1, (C,))
    assert added(rare, RareSpaceView(chairs=(A, C, B))) == RareSpaceAdded(1, (C, B))
    assert added(standard, ChairSpaceView(chair=None, below=(B, A, C))) == ChairSpaceAdded(None, 0, (B, A, C))


def test_a_space_the_view_did_not_have_or_of_another_kind_has_no_delta() -> None:
    standard = ChairSpaceView(chair=None, below=(A, B))
    rare = RareSpaceView(chairs=(A, B))
    assert added(None, standard) is None  # a space the view did not have
    assert added(None, rare) is None
    assert added(standard, rare) is None  # a changed kind
    assert added(rare, standard) is None


def _score(seat: int, chairs: tuple[str, ...], prestige: int = 0, **resources: int) -> Score:
    return Score(seat=seat, chairs=chairs, prestige=prestige, resources=resources)


def _view(version: int, spaces: dict[str, ChairSpaceView | RareSpaceView], *scores: Score) -> View:
    return View("g", version, False, (), spaces, scores)


EMPTY = ChairSpaceView(chair=None, below=())
NO_CHAIRS = RareSpaceView(chairs=())


def test_a_steal_carries_the_space_s_addition_and_both_seats_new_counts_there() -> None:
    rare = RareSpaceView(chairs=(A, A))
    before = _view(
        5,
        {"viola": ChairSpaceView(chair=A, below=()), "rare_winds": rare},
        _score(0, ("viola", "rare_winds", "rare_winds"), 7, money=4),
        _score(1, (), 0, money=2),
    )
    after = _view(
        6,
        {"viola": ChairSpaceView(chair=B, below=(A,)), "rare_winds": rare},
        _score(0, ("rare_winds", "rare_winds"), 6, money=4),
        _score(1, ("viola",), 1, money=6),
    )
    assert view_delta(before, after) == ViewDelta(
        version=6,
        ended=False,
        spaces={},
        added={"viola": ChairSpaceAdded(chair=B, below_from=0, below=(A,))},
        score_changes=(
            ScoreChange(seat=0, prestige=6, resources={"money": 4}, held={"viola": 0}),
            ScoreChange(seat=1, prestige=1, resources={"money": 6}, held={"viola": 1}),
        ),
    )


def test_a_rare_chair_names_its_space_s_new_count_never_the_seat_s_other_chairs() -> None:
    many = tuple(["rare_winds"] * 300)
    rare = RareSpaceView(chairs=(A,) * 300)
    before = _view(9, {"lute": EMPTY, "rare_winds": rare}, _score(0, many, 900, money=1))
    after = _view(
        10,
        {"lute": EMPTY, "rare_winds": RareSpaceView(chairs=(*rare.chairs, A))},
        _score(0, (*many, "rare_winds"), 903, money=2),
    )
    delta = view_delta(before, after)
    assert delta.added == {"rare_winds": RareSpaceAdded(chairs_from=300, chairs=(A,))}
    assert delta.score_changes == (ScoreChange(0, 903, {"money": 2}, {"rare_winds": 301}),)


def test_what_did_not_change_is_left_out() -> None:
    spaces: dict[str, ChairSpaceView | RareSpaceView] = {
        "lute": ChairSpaceView(chair=A, below=(B,)),
        "rare_winds": RareSpaceView(chairs=(C,)),
    }
    scores = (_score(0, ("lute",), 1, money=2), _score(1, ()))
    before = _view(3, spaces, *scores)
    # Rendered again from scratch: equal values, other objects.
    again = _view(
        3, {"lute": ChairSpaceView(chair=A, below=(B,)), "rare_winds": RareSpaceView(chairs=(C,))}, *scores
    )
    assert all(again.spaces[space_id] is not space for space_id, space in spaces.items())
    assert view_delta(before, again) == ViewDelta(3, False, {}, {}, ())
    # Only resources moved: the score change names no chair count.
    richer = _view(4, spaces, _score(0, ("lute",), 1, money=4), scores[1])
    assert view_delta(before, richer).score_changes == (ScoreChange(0, 1, {"money": 4}, {}),)
    # A game that ended changes nothing but `ended`.
    ended = replace(before, version=4, ended=True)
    assert view_delta(before, ended) == ViewDelta(4, True, {}, {}, ())


def test_a_space_the_earlier_view_did_not_have_comes_whole_and_a_shortened_one_cut() -> None:
    before = _view(1, {"lute": ChairSpaceView(chair=None, below=(A, B))})
    shortened = ChairSpaceView(chair=None, below=(A,))
    after = _view(2, {"lute": shortened, "rare_winds": NO_CHAIRS})
    assert view_delta(before, after) == ViewDelta(
        2, False, {"rare_winds": NO_CHAIRS}, {"lute": ChairSpaceAdded(None, 1, ())}, ()
    )


def test_a_take_back_returns_the_chair_and_the_counts_and_carries_no_token_of_the_space() -> None:
    below = (A, B) * 200
    before = _view(
        800,
        {"viola": ChairSpaceView(chair=C, below=(*below, A)), "rare_winds": RareSpaceView(chairs=(A,) * 300)},
        _score(0, ("rare_winds",) * 300, 900, money=9),
        _score(2, ("viola",), 3, money=8),
    )
    after = _view(
        801,
        {"viola": ChairSpaceView(chair=A, below=below), "rare_winds": before.spaces["rare_winds"]},
        _score(0, ("viola", *("rare_winds",) * 300), 903, money=9),
        _score(2, (), 0),
    )
    delta = view_delta(before, after)
    assert delta == ViewDelta(
        801,
        False,
        {},
        {"viola": ChairSpaceAdded(chair=A, below_from=400, below=())},
        (ScoreChange(0, 903, {"money": 9}, {"viola": 1}), ScoreChange(2, 0, {}, {"viola": 0})),
    )
    # Its size is the change's, not the space's: the 400 tokens left below the line are not in it.
    assert len(msgspec.json.encode(delta)) < 400 < len(msgspec.json.encode(after.spaces["viola"])) / 10


def test_a_seat_the_earlier_view_did_not_have_comes_with_every_count() -> None:
    before = View("", 0, False, (), {}, ())
    after = _view(1, {"lute": ChairSpaceView(chair=A, below=())}, _score(0, ("lute",), 1, money=4))
    delta = view_delta(before, after)
    assert delta.spaces == after.spaces and delta.added == {}
    assert delta.score_changes == (ScoreChange(0, 1, {"money": 4}, {"lute": 1}),)


# Random games: a delta applied as a client does gives the later view --------------------------------


@st.composite
def boards(draw: st.DrawFn) -> list[Board]:
    """A game's boards after each accepted command, folded incrementally as the server does."""
    players = draw(st.integers(1, 4))
    create = CreateGame(game_id="g", players=("Ada", "Ben", "Cy", "Di")[:players])
    board = Board()
    for event in decide(Game(), create):
        board = apply(board, event)
    played = [board]
    played_commands: list[Place | TakeBack | EndGame] = [*draw(st.lists(commands(players), max_size=60))]
    if draw(st.booleans()):
        played_commands.append(EndGame(seat=0, id="end"))
    for command in played_commands:
        try:
            events = decide(board.game, command)
        except Rejected:
            continue
        board = functools.reduce(apply, events, board)
        played.append(board)
    return played


def oracle_apply(view: View, delta: ViewDelta) -> View:
    """A client's reading of a delta, stated plainly on the views' own types."""
    spaces = dict(view.spaces)
    spaces.update(delta.spaces)
    for space_id, addition in delta.added.items():
        space = spaces[space_id]
        if isinstance(addition, ChairSpaceAdded):
            assert isinstance(space, ChairSpaceView) and len(space.below) >= addition.below_from
            spaces[space_id] = ChairSpaceView(
                addition.chair, space.below[: addition.below_from] + addition.below
            )
        else:
            assert isinstance(space, RareSpaceView) and len(space.chairs) >= addition.chairs_from
            spaces[space_id] = RareSpaceView(space.chairs[: addition.chairs_from] + addition.chairs)
    scores = list(view.scores)
    for change in delta.score_changes:
        counts = Counter(scores[change.seat].chairs)
        for space_id, count in change.held.items():
            counts[space_id] = count
        chairs = tuple(space_id for space_id in spaces for _ in range(counts[space_id]))
        scores[change.seat] = Score(change.seat, chairs, change.prestige, change.resources)
    return replace(view, version=delta.version, ended=delta.ended, spaces=spaces, scores=tuple(scores))


def assert_only_what_changed(before: View, after: View, delta: ViewDelta) -> None:
    for space_id in {*delta.spaces, *delta.added}:
        assert before.spaces.get(space_id) != after.spaces[space_id], space_id
    for change in delta.score_changes:
        old, new = before.scores[change.seat], after.scores[change.seat]
        assert old != new
        for space_id, count in change.held.items():
            assert old.chairs.count(space_id) != count == new.chairs.count(space_id)


def _json(value: object) -> object:
    return msgspec.json.decode(msgspec.json.encode(value))


@settings(max_examples=150, deadline=None)
@given(boards(), st.data())
def test_a_delta_applied_to_the_earlier_view_gives_the_later_one(
    played: list[Board], data: st.DataObject
) -> None:
    first, last = sorted(data.draw(st.lists(st.integers(0, len(played) - 1), min_size=2, max_size=2)))
    early, late = played[first].view, played[last].view
    # As the server folds (unchanged spaces shared), and rendered from scratch (every space a new object).
    for before in (early, render(played[first].game)):
        delta = view_delta(before, late)
        assert oracle_apply(before, delta) == late
        assert_only_what_changed(before, late, delta)
        # And as the reference client applies the delta's JSON to the view's JSON.
        assert apply_delta(_json(before), _json(delta)) == _json(late)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(boards())
def test_a_live_client_applying_each_delta_in_turn_keeps_the_view(played: list[Board]) -> None:
    view = played[0].view
    held = _json(view)
    for before, after in zip(played, played[1:], strict=False):
        delta = view_delta(before.view, after.view)
        assert delta.spaces == {}  # a live placement or take-back changes a space's end, never all of it
        assert len(delta.added) <= 1
        view = oracle_apply(view, delta)
        held = apply_delta(held, _json(delta))  # type: ignore[arg-type]
        assert view == after.view and held == _json(after.view)


@settings(max_examples=150, deadline=None)
@given(boards())
def test_the_view_folded_event_by_event_is_the_view_rendered_from_scratch(played: list[Board]) -> None:
    # A live node folds each event into the view it has (re-rendering what the event touched); a replay
    # renders the state once: both must be the same view, at every version.
    for board in played:
        assert board.view == render(board.game)
