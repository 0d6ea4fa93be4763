"""Pure helpers for the rules: where a token may go, what a chair pays, how tokens read in words."""

from __future__ import annotations

from typing import assert_never

from domain.layout import Layout, SpaceDef
from domain.messages import Amounts, InstrumentToken, PerformanceToken, RepairToken, Token
from domain.vocabulary import DOUBLING_SKILL, MATERIAL_CHOICE, RESOURCES, Material


def may_go(space: SpaceDef, token: Token) -> bool:
    """Whether `token` may be placed in `space` (rules.md §4)."""
    match token:
        case InstrumentToken(instrument=instrument):
            return space.instrument == instrument
        case PerformanceToken(era=era):
            return era in space.eras
        case RepairToken(family=family):
            return space.family == family and not space.rare
        case _:
            assert_never(token)


def legal_spaces(layout: Layout, token: Token) -> tuple[str, ...]:
    """The ids of every space `token` may go to, in layout order."""
    return tuple(space.id for space in layout.spaces if may_go(space, token))


def is_instrument(token: Token) -> bool:
    """Instruments hold their chair for good; performances and repairs can be outnumbered."""
    return isinstance(token, InstrumentToken)


def doubles(token: Token, skill: int) -> bool:
    """A chair bonus is doubled for an instrument finished by a worker of skill 6 or more."""
    return is_instrument(token) and skill >= DOUBLING_SKILL


def materials_needed(space: SpaceDef, token: Token, skill: int) -> int:
    """How many materials of the player's choice a placement in `space` must name (0 for most)."""
    per_chair = space.bonus.get(MATERIAL_CHOICE, 0)
    return per_chair * (2 if doubles(token, skill) else 1)


def chair_bonus(space: SpaceDef, doubled: bool, materials: tuple[Material, ...]) -> Amounts:
    """The resources a First Chair in `space` pays, with the chosen materials, in canonical order."""
    factor = 2 if doubled else 1
    gained: dict[str, int] = {}
    for key, amount in space.bonus.items():
        if key != MATERIAL_CHOICE:
            gained[key] = gained.get(key, 0) + amount * factor
    for material in materials:
        gained[material] = gained.get(material, 0) + 1
    return canonical(gained)


def canonical(amounts: Amounts) -> Amounts:
    """Drop zero amounts and order keys as RESOURCES does, so equal gains encode to equal bytes."""
    return {key: amounts[key] for key in RESOURCES if amounts.get(key)}


def add(total: Amounts, gained: Amounts) -> Amounts:
    """A new resource total with `gained` added."""
    merged = dict(total)
    for key, amount in gained.items():
        merged[key] = merged.get(key, 0) + amount
    return canonical(merged)


def describe(token: Token) -> str:
    """A token in words: 'a Classical performance', 'a Winds repair', 'a Viola instrument'."""
    match token:
        case InstrumentToken(instrument=instrument):
            return f"a {_title(instrument)} instrument"
        case PerformanceToken(era=era):
            return f"a {_title(era)} performance"
        case RepairToken(family=family):
            return f"a {_title(family)} repair"
        case _:
            assert_never(token)


def _title(name: str) -> str:
    return name.replace("_keyboards", " & keyboards").replace("_", " ").title()


def join_ids(ids: tuple[str, ...] | list[str]) -> str:
    """'a, b or c' for a message."""
    if not ids:
        return "nowhere"
    if len(ids) == 1:
        return ids[0]
    return f"{', '.join(ids[:-1])} or {ids[-1]}"
