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
    "ChairSpaceView",
    "Counted",
    "EraCount",
    "PlayerView",
    "RareSpaceView",
    "SpaceView",
    "View",
    "apply",
    "count_eras_covered",
    "count_in_era",
    "count_in_family",
    "project",
    "render",
    "tokens_of",
    "view_at",
]
