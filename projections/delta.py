"""What changed between two views, as a live frame's `view_delta` carries it (protocol.md).

A placement only ever adds to a space: a token goes below the line, takes the First Chair (the holder
going below the line), or joins a rare space's chairs. So a space's change is its new chair and the
tokens appended to its lists, whose size does not grow with the game, where the space itself does (a
long game's spaces hold hundreds of tokens). Each addition names the index its tokens start at, so a
client can tell that it applies to the space it holds. Likewise a seat's score travels as its new
prestige and resources and the chair counts that moved, never as its list of chairs (which grows with
the rare chairs it holds)."""

from __future__ import annotations

import msgspec

from domain import Score, Seated
from domain.messages import Amounts
from projections.board import ChairSpaceView, RareSpaceView, SpaceView, View


class ChairSpaceAdded(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="standard"):
    """A standard or Violin space's First Chair, and its tokens below the line from `below_from` on."""

    chair: Seated | None
    below_from: int
    below: tuple[Seated, ...]


class RareSpaceAdded(msgspec.Struct, frozen=True, gc=False, tag_field="kind", tag="rare"):
    """A rare space's First Chairs from `chairs_from` on."""

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


class ViewDelta(msgspec.Struct, frozen=True, gc=False):
    """A live frame's `view_delta`: what each changed space gained (`added`), any space that changed
    otherwise, whole (`spaces`), and the seats whose scores changed (`score_changes`)."""

    version: int
    ended: bool
    spaces: dict[str, SpaceView]
    added: dict[str, SpaceAdded]
    score_changes: tuple[ScoreChange, ...]


def added(before: SpaceView | None, after: SpaceView) -> SpaceAdded | None:
    """What `after` adds to `before`; None when it is not an addition (a new space, any other change)."""
    if isinstance(after, ChairSpaceView):
        if isinstance(before, ChairSpaceView):
            kept = len(before.below)
            # Identity first, element by element: placed tokens are shared values, so this is cheap.
            if after.below[:kept] == before.below:
                return ChairSpaceAdded(after.chair, kept, after.below[kept:])
        return None
    if isinstance(before, RareSpaceView):
        kept = len(before.chairs)
        if after.chairs[:kept] == before.chairs:
            return RareSpaceAdded(kept, after.chairs[kept:])
    return None


def view_delta(before: View, after: View) -> ViewDelta:
    """What changed from `before` to `after` (two views of one game): the spaces' additions (or the
    spaces whole when a change is not one) and the changed scores.

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
    return ViewDelta(after.version, after.ended, whole, extended, tuple(score_changes))


def _adds_nothing(before: SpaceView | None, addition: SpaceAdded) -> bool:
    if isinstance(addition, RareSpaceAdded):
        return not addition.chairs
    return not addition.below and isinstance(before, ChairSpaceView) and addition.chair == before.chair


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
