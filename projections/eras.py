"""Era counting for awards, goals and patron powers, with the Violin rule of rules.md §6.

A token in a Violin space counts for one era only for each evaluation: for every criterion separately,
each of the player's Violin-space tokens is assigned to exactly one of its two eras, the one that gives
that player the best result for that criterion, and the assignment is returned with the count.
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import combinations, product
from typing import Literal

import msgspec

from domain import Game, Token
from domain.vocabulary import ERAS, Era, Family

Kind = Literal["instrument", "performance", "repair"]


class Counted(msgspec.Struct, frozen=True, gc=False):
    """One of the player's tokens: where it lies, and whether it holds a First Chair."""

    space: str
    in_chair: bool
    index: int  # position among the space's chairs (rare) or below the line (oldest first); 0 for a chair
    token: Token


class Assigned(msgspec.Struct, frozen=True, gc=False):
    """The era a Violin-space token was counted in for one evaluation."""

    token: Counted
    era: Era


class EraCount(msgspec.Struct, frozen=True, gc=False):
    """The best value of a criterion for a player, and the Violin assignment that achieves it."""

    value: int
    assignment: tuple[Assigned, ...]


def tokens_of(
    game: Game, seat: int, *, chairs_only: bool = False, kinds: Collection[Kind] | None = None
) -> list[Counted]:
    """The player's tokens in the Orchestra (or their First Chairs only), optionally of some kinds."""
    found: list[Counted] = []
    if game.layout is None:
        return found
    for space in game.layout.spaces:
        held = game.spaces[space.id]
        places = [(True, i, s) for i, s in enumerate(held.chairs)]
        if held.chair is not None:
            places.append((True, 0, held.chair))
        if not chairs_only:
            places += [(False, i, s) for i, s in enumerate(held.below)]
        for in_chair, index, seated in places:
            if seated.seat == seat and (kinds is None or _kind(seated.token) in kinds):
                found.append(Counted(space.id, in_chair, index, seated.token))
    return found


def count_in_era(
    game: Game, seat: int, era: Era, *, chairs_only: bool = False, kinds: Collection[Kind] | None = None
) -> EraCount:
    """Tokens the player has in `era`; every Violin token that can be counted there is."""
    total = 0
    assignment: list[Assigned] = []
    for counted in tokens_of(game, seat, chairs_only=chairs_only, kinds=kinds):
        eras = _eras(game, counted.space)
        if len(eras) == 2:
            chosen = era if era in eras else eras[0]
            assignment.append(Assigned(counted, chosen))
            total += chosen == era
        else:
            total += era in eras
    return EraCount(total, tuple(assignment))


def count_eras_covered(
    game: Game, seat: int, *, chairs_only: bool = False, kinds: Collection[Kind] | None = None
) -> EraCount:
    """How many different eras the player's tokens cover, choosing each Violin token's era to cover most."""
    fixed: set[str] = set()
    violins: dict[tuple[Era, ...], list[Counted]] = {}
    for counted in tokens_of(game, seat, chairs_only=chairs_only, kinds=kinds):
        eras = _eras(game, counted.space)
        if len(eras) == 2:
            violins.setdefault(eras, []).append(counted)
        else:
            fixed.update(eras)
    # Each group of Violin tokens sharing an era pair can cover at most min(len, 2) of its eras; try every
    # subset per group (at most 4 per group, 2 groups), so this stays tiny however many tokens there are.
    groups = list(violins.items())
    options = [
        [subset for size in range(min(len(tokens), 2) + 1) for subset in combinations(pair, size)]
        for pair, tokens in groups
    ]
    best_value = len(fixed)
    best_choice: tuple[tuple[Era, ...], ...] = tuple(() for _ in groups)
    for choice in product(*options):
        covered = fixed.union(*choice) if choice else fixed
        if len(covered) > best_value:
            best_value, best_choice = len(covered), choice
    assignment: list[Assigned] = []
    for (pair, tokens), subset in zip(groups, best_choice, strict=True):
        for i, counted in enumerate(tokens):
            assignment.append(Assigned(counted, subset[i] if i < len(subset) else pair[0]))
    return EraCount(best_value, tuple(assignment))


def count_in_family(
    game: Game,
    seat: int,
    family: Family,
    *,
    chairs_only: bool = False,
    kinds: Collection[Kind] | None = None,
) -> EraCount:
    """Tokens the player has in a family's row (rare space included); no Violin choice is needed."""
    layout = game.layout
    value = sum(
        1
        for counted in tokens_of(game, seat, chairs_only=chairs_only, kinds=kinds)
        if layout is not None and (space := layout.space(counted.space)) and space.family == family
    )
    return EraCount(value, ())


def _eras(game: Game, space_id: str) -> tuple[Era, ...]:
    assert game.layout is not None
    space = game.layout.space(space_id)
    assert space is not None
    return tuple(e for e in ERAS if e in space.eras)


def _kind(token: Token) -> Kind:
    kind: Kind = msgspec.inspect.type_info(type(token)).tag  # type: ignore[attr-defined]
    return kind
