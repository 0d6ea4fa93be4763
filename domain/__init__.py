"""The Orchestra rules: pure, synchronous, and driven by JSON.

>>> import msgspec, domain
>>> command = msgspec.json.decode(b'{"type": "place", ...}', type=domain.Command)
>>> events = domain.decide(state, command)          # or raises domain.Rejected
>>> state = functools.reduce(domain.evolve, events, state)
"""

from domain.errors import (
    BadName,
    BadRequest,
    Forbidden,
    GameOver,
    IllegalSpace,
    LimitReached,
    MissingChoice,
    Rejected,
    StaleVersion,
    UnknownGame,
)
from domain.game import Game, Seated, SpaceState, decide, evolve, fold, ranking, scores
from domain.layout import Layout, LayoutError, SpaceDef, parse_layout
from domain.layouts import BUILTIN_LAYOUTS, STANDARD
from domain.messages import (
    BaseCommand,
    BaseEvent,
    ChairClaimed,
    ChairStolen,
    Command,
    CreateGame,
    EndGame,
    Event,
    GameCreated,
    GameEnded,
    InstrumentToken,
    PerformanceToken,
    Place,
    PlacedBelowLine,
    PlacementEvent,
    Rank,
    RepairToken,
    Score,
    Token,
)
from domain.rules import describe, legal_spaces

__all__ = [
    "BUILTIN_LAYOUTS",
    "STANDARD",
    "BadName",
    "BadRequest",
    "BaseCommand",
    "BaseEvent",
    "ChairClaimed",
    "ChairStolen",
    "Command",
    "CreateGame",
    "EndGame",
    "Event",
    "Forbidden",
    "Game",
    "GameCreated",
    "GameEnded",
    "GameOver",
    "IllegalSpace",
    "InstrumentToken",
    "Layout",
    "LayoutError",
    "LimitReached",
    "MissingChoice",
    "PerformanceToken",
    "Place",
    "PlacedBelowLine",
    "PlacementEvent",
    "Rank",
    "Rejected",
    "RepairToken",
    "Score",
    "Seated",
    "SpaceDef",
    "SpaceState",
    "StaleVersion",
    "Token",
    "UnknownGame",
    "decide",
    "describe",
    "evolve",
    "fold",
    "legal_spaces",
    "parse_layout",
    "ranking",
    "scores",
]
