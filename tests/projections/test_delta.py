"""What a space gained between two views (a view delta's `added`), and when a change is not an addition."""

from __future__ import annotations

from domain import InstrumentToken, PerformanceToken, Seated
from projections import ChairSpaceAdded, ChairSpaceView, RareSpaceAdded, RareSpaceView, added

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


def test_anything_but_an_addition_has_no_delta() -> None:
    standard = ChairSpaceView(chair=None, below=(A, B))
    rare = RareSpaceView(chairs=(A, B))
    assert added(None, standard) is None  # a space the view did not have
    assert added(None, rare) is None
    assert added(standard, ChairSpaceView(chair=None, below=(B, A, C))) is None  # reordered
    assert added(standard, ChairSpaceView(chair=None, below=(A,))) is None  # shortened
    assert added(rare, RareSpaceView(chairs=(A, C, B))) is None
    assert added(standard, rare) is None  # a changed kind
    assert added(rare, standard) is None
