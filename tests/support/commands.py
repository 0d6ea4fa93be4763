"""Random commands for property tests: placements that fit their space (rare chairs and steals often),
now and then a take-back by any seat."""

from __future__ import annotations

from hypothesis import strategies as st

from domain import STANDARD, InstrumentToken, PerformanceToken, Place, RepairToken, TakeBack, Token

SPACES = {space.id: space for space in STANDARD.spaces}
RARE = tuple(space.id for space in STANDARD.spaces if space.rare)
# Rare spaces and two contested standard ones come often: many rare chairs, many steals.
SPACE_CHOICES = (*RARE, *RARE, *RARE, "viola", "viola", "viola", "violin_bc", *SPACES)


def _fitting(space_id: str) -> list[Token]:
    space = SPACES[space_id]
    fitting: list[Token] = [InstrumentToken(instrument=space.instrument)]
    if space.eras:
        fitting += [PerformanceToken(era=era) for era in space.eras]
        fitting += [RepairToken(family=space.family)] * 2
    return fitting


@st.composite
def placements(draw: st.DrawFn, players: int) -> Place:
    space_id = draw(st.sampled_from(SPACE_CHOICES))
    token = draw(st.sampled_from(_fitting(space_id)))
    skill = draw(st.integers(1, 10))
    per_chair = SPACES[space_id].bonus.get("material_choice", 0)
    count = per_chair * (2 if isinstance(token, InstrumentToken) and skill >= 6 else 1)
    materials = tuple(
        draw(st.lists(st.sampled_from(["wood", "metal", "animal"]), min_size=count, max_size=count))
    )
    return Place(
        seat=draw(st.integers(0, players - 1)),
        id="c",
        token=token,
        space=space_id,
        skill=skill,
        consolation=draw(st.sampled_from(["money", "inspiration"])),
        materials=materials or None,  # type: ignore[arg-type]
    )


@st.composite
def commands(draw: st.DrawFn, players: int) -> Place | TakeBack:
    """A placement, or now and then a take-back by any seat (refused unless it is the last placer's)."""
    if draw(st.integers(0, 3)) == 0:
        return TakeBack(seat=draw(st.integers(0, players - 1)), id="t")
    return draw(placements(players))
