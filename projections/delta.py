"""What changed between two views, as a live frame's `view_delta` carries it (protocol.md).

A placement only adds to the end of a space: a token goes below the line, takes the First Chair (the
holder going below the line), or joins a rare space's chairs; a take-back removes from the end what its
placement added and puts the chair back. So a space's change is its chair and the end of its list from
an index on: the list is cut to that index, then the new tokens follow (none for a take-back). Its size
does not grow with the game, where the space itself does (a long game's spaces hold hundreds of tokens).
Likewise a seat's score travels as its new prestige and resources and the chair counts that moved,
never as its list of chairs (which grows with the rare chairs it holds)."""

from __future__ import annotations

import msgspec

from domain import Score, Seated
from domain.messages import Amounts
from projections.board import ChairSpaceView, PlayerView, RareSpaceView, SpaceView, View


class ChairSpaceAdded(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="standard"):
    """A standard or Violin space's First Chair, and its tokens below the line from `below_from` on: the
    list held is cut to `below_from` tokens (all of them unless something was taken back), then `below`
    follows."""

    chair: Seated | None
    below_from: int
    below: tuple[Seated, ...]


class RareSpaceAdded(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="rare"):
    """A rare space's First Chairs from `chairs_from` on: the list held is cut to `chairs_from` chairs,
    then `chairs` follows."""

    chairs_from: int
    chairs: tuple[Seated, ...]


SpaceAdded = ChairSpaceAdded | RareSpaceAdded


class ScoreChange(msgspec.Struct, frozen=True, gc=False):
    """A seat's Score that changed: its new prestige and resources, and in `held` the new number of First
    Chairs it holds at each space where that number changed (0 when it lost its last chair there)."""

    seat: int
    prestige: int
    resources: Amounts
    held: dict[str, int]


class ViewDelta(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """A live frame's `view_delta`: each changed space's chair and the end of its list (`added`), a space
    the view held did not have or had of another kind, whole (`spaces`), the seats whose scores
    changed (`score_changes`), and the players whole when a seat was taken or closed (`players`, only
    then)."""

    version: int
    ended: bool
    spaces: dict[str, SpaceView]
    added: dict[str, SpaceAdded]
    score_changes: tuple[ScoreChange, ...]
    players: tuple[PlayerView, ...] | None = None


def added(before: SpaceView | None, after: SpaceView) -> SpaceAdded | None:
    """What turns `before` into `after`: the chair, and the end of the list from where the two part; None
    when `before` is not a space of the same kind (the space goes whole)."""
    if isinstance(after, ChairSpaceView):
        if isinstance(before, ChairSpaceView):
            kept = _kept(before.below, after.below)
            return ChairSpaceAdded(after.chair, kept, after.below[kept:])
        return None
    if isinstance(before, RareSpaceView):
        kept = _kept(before.chairs, after.chairs)
        return RareSpaceAdded(kept, after.chairs[kept:])
    return None


def _kept(before: tuple[Seated, ...], after: tuple[Seated, ...]) -> int:
    """How many tokens at the start of `before` `after` keeps.

    Tuples compare identity first, element by element, and placed tokens are shared values: the two
    common cases (tokens added at the end, tokens taken from it) cost a pass in C; only a mix of both
    in one frame walks the lists here.
    """
    kept = len(before)
    if after[:kept] == before:
        return kept
    if before[: len(after)] == after:
        return len(after)
    # Neither is the start of the other: they part within the shorter one.
    return next(index for index, (old, new) in enumerate(zip(before, after, strict=False)) if old != new)


def view_delta(before: View, after: View) -> ViewDelta:
    """What changed from `before` to `after` (two views of one game): each changed space's chair and list
    end (the space whole when `before` has no such space) and the changed scores.

    Unchanged spaces are the same objects in both views (a placement renders only its own space again),
    so most are passed over by identity; a space rendered again without a change adds nothing.
    """
    whole: dict[str, SpaceView] = {}
    extended: dict[str, SpaceAdded] = {}
    changed: list[str] = []
    old_spaces = before.spaces
    for space_id, space in after.spaces.items():
        old = old_spaces.get(space_id)
        if old is space:
            continue
        addition = added(old, space)
        if addition is None:
            whole[space_id] = space
        elif _adds_nothing(old, addition):
            continue
        else:
            extended[space_id] = addition
        changed.append(space_id)
    old_scores = before.scores
    score_changes = []
    for index, score in enumerate(after.scores):
        old_score = old_scores[index] if index < len(old_scores) else None
        if old_score is score or old_score == score:
            continue
        score_changes.append(
            ScoreChange(score.seat, score.prestige, score.resources, _held(old_score, score, changed))
        )
    players = None if after.players is before.players or after.players == before.players else after.players
    return ViewDelta(after.version, after.ended, whole, extended, tuple(score_changes), players)


def _adds_nothing(before: SpaceView | None, addition: SpaceAdded) -> bool:
    if isinstance(addition, RareSpaceAdded):
        return (
            not addition.chairs
            and isinstance(before, RareSpaceView)
            and addition.chairs_from == len(before.chairs)
        )
    return (
        not addition.below
        and isinstance(before, ChairSpaceView)
        and addition.below_from == len(before.below)
        and addition.chair == before.chair
    )


def _held(before: Score | None, after: Score, changed: list[str]) -> dict[str, int]:
    """The seat's new chair counts at the spaces where they changed.

    Counts move only where a space changed, so only those are counted: a seat holding hundreds of rare
    chairs is not counted whole. `chairs` is in layout order, as `changed` is.
    """
    if before is None:
        return {space_id: after.chairs.count(space_id) for space_id in dict.fromkeys(after.chairs)}
    if before.chairs is after.chairs or before.chairs == after.chairs:
        return {}
    held: dict[str, int] = {}
    for space_id in changed:
        count = after.chairs.count(space_id)
        if count != before.chairs.count(space_id):
            held[space_id] = count
    return held
