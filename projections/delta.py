"""What a space gained between two views, as a view delta carries it (protocol.md's `view_delta`).

A placement only ever adds to a space: a token goes below the line, takes the First Chair (the holder
going below the line), or joins a rare space's chairs. So a space's change is its new chair and the
tokens appended to its lists, whose size does not grow with the game, where the space itself does (a
long game's spaces hold hundreds of tokens). Each addition names the index its tokens start at, so a
client can tell that it applies to the space it holds.
"""

from __future__ import annotations

import msgspec

from domain import Score, Seated
from projections.board import ChairSpaceView, RareSpaceView, SpaceView


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


class ViewPatch(msgspec.Struct, frozen=True):
    """A live frame's `view_patch`: the spaces that changed, whole, and the fields that move."""

    version: int
    ended: bool
    spaces: dict[str, SpaceView]
    scores: tuple[Score, ...]


class ViewDelta(msgspec.Struct, frozen=True):
    """A live frame's `view_delta`: what each changed space gained (`added`), any space that changed
    otherwise whole (`spaces`), and the fields that move."""

    version: int
    ended: bool
    spaces: dict[str, SpaceView]
    added: dict[str, SpaceAdded]
    scores: tuple[Score, ...]


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
