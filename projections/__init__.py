"""Pure folds from a game's events to what clients read: the board view, scores, era counts."""

from projections.board import (
    Board,
    ChairSpaceView,
    PlayerView,
    RareSpaceView,
    SpaceView,
    View,
    apply,
    project,
    render,
    view_at,
)
from projections.delta import (
    ChairSpaceAdded,
    RareSpaceAdded,
    ScoreChange,
    SpaceAdded,
    ViewDelta,
    added,
    view_delta,
)
from projections.eras import (
    Assigned,
    Counted,
    EraCount,
    count_eras_covered,
    count_in_era,
    count_in_family,
    tokens_of,
)

__all__ = [
    "Assigned",
    "Board",
    "ChairSpaceAdded",
    "ChairSpaceView",
    "Counted",
    "EraCount",
    "PlayerView",
    "RareSpaceAdded",
    "RareSpaceView",
    "ScoreChange",
    "SpaceAdded",
    "SpaceView",
    "View",
    "ViewDelta",
    "added",
    "apply",
    "count_eras_covered",
    "count_in_era",
    "count_in_family",
    "project",
    "render",
    "tokens_of",
    "view_at",
    "view_delta",
]
