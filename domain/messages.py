"""Commands and events: frozen msgspec Structs whose tags are stored and never change.

Commands are the wire frames of protocol.md plus the `seat`, which the server adds from the connection's
token. Events are the facts written to a game's stream; their JSON form is the wire form of protocol.md.
Evolution rule: a new field gets a default; a type or tag never changes (a breaking change is a new tag).

Every Struct of the domain, the projections and the envelopes is `gc=False`: they are immutable values
that can never be part of a reference cycle, and a long game holds thousands of them, which the cyclic
garbage collector would otherwise scan again and again (measured as pauses in the p99 latency).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from domain import patterns
from domain.layout import Layout
from domain.vocabulary import Consolation, Era, Family, Material, Spectators

# Every struct holding a CommandId calls `patterns.check_end` on it (see domain.patterns).
CommandId = Annotated[str, msgspec.Meta(pattern=patterns.COMMAND_ID)]
Seat = Annotated[int, msgspec.Meta(ge=0, le=3)]
# A name as sent: bounded here only in size; domain.names decides what a name may be (trimmed, 1 to 32).
Name = Annotated[str, msgspec.Meta(max_length=128)]
Skill = Annotated[int, msgspec.Meta(ge=1, le=10)]
Ref = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Amounts = dict[str, int]


# Tokens ----------------------------------------------------------------------------------------------


class InstrumentToken(
    msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, tag_field="kind", tag="instrument"
):
    """A finished instrument; it goes to its own space (a Violin to either Violin space)."""

    instrument: Ref


class PerformanceToken(
    msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, tag_field="kind", tag="performance"
):
    """A performance of an era; it goes to any space of that era's column."""

    era: Era


class RepairToken(
    msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, tag_field="kind", tag="repair"
):
    """A repair of a family; it goes to any non-rare space of that family's row."""

    family: Family


Token = InstrumentToken | PerformanceToken | RepairToken


# Commands --------------------------------------------------------------------------------------------


class BaseCommand(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, tag_field="type"):
    """Base of every command; never instantiated."""


class CreateGame(BaseCommand, frozen=True, tag="create_game"):
    """Create a game for 1 to 4 seats on a named layout; a seat whose name is None is open (its player
    names themselves with TakeSeat); `open` lists the game as an open table anyone may join."""

    game_id: Ref
    players: Annotated[tuple[Name | None, ...], msgspec.Meta(min_length=1, max_length=4)]
    layout: str = "standard"
    spectators: Spectators = "public"
    max_placements: Annotated[int, msgspec.Meta(ge=1)] = 1000
    open: bool = False


class Place(BaseCommand, frozen=True, tag="place"):
    """Place a token in a space of the Orchestra."""

    seat: Seat
    id: CommandId
    token: Token
    space: Ref
    skill: Skill = 1
    consolation: Consolation = "money"
    materials: tuple[Material, ...] | None = None
    expected_version: Annotated[int, msgspec.Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")


class EndGame(BaseCommand, frozen=True, tag="end_game"):
    """End the game and score it (seat 0 only)."""

    seat: Seat
    id: CommandId
    expected_version: Annotated[int, msgspec.Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")


class TakeBack(BaseCommand, frozen=True, tag="take_back"):
    """Take back the seat's own placement while it is the game's last event (a table rule of this server)."""

    seat: Seat
    id: CommandId
    expected_version: Annotated[int, msgspec.Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")


Credential = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]


class TakeSeat(BaseCommand, frozen=True, tag="take_seat"):
    """Give an open seat its player's name (from the seat's own token, or a join of an open table, which
    also gives the seat a new token: `credential`, its hash)."""

    seat: Seat
    id: CommandId
    name: Name
    credential: Credential | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")


class CloseSeat(BaseCommand, frozen=True, tag="close_seat"):
    """The host closes an open seat before the first placement: it takes no part in the game."""

    target: Seat
    id: CommandId
    seat: None = None  # a host's command: sent by no seat

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")


class ReissueToken(BaseCommand, frozen=True, tag="reissue_token"):
    """The host gives a seat a new token: `credential` is its hash (the shell hashes; the old one is void)."""

    target: Seat
    id: CommandId
    credential: Credential
    seat: None = None  # a host's command: sent by no seat

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")


class PlayAgain(BaseCommand, frozen=True, tag="play_again"):
    """Name the game that follows this ended one (a seat, or the host when `seat` is None); once only."""

    id: CommandId
    game_id: Ref
    seat: Seat | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")


Command = CreateGame | Place | EndGame | TakeBack | TakeSeat | CloseSeat | ReissueToken | PlayAgain


# Events ----------------------------------------------------------------------------------------------


class Score(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """One seat's result: First Chairs held (space ids, a rare space once per chair), prestige, gains."""

    seat: int
    chairs: tuple[str, ...]
    prestige: int
    resources: Amounts


class Rank(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A seat's place in the ranking; equal prestige shares a rank (1, 1, 3)."""

    seat: int
    rank: int
    prestige: int


class BaseEvent(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, tag_field="type"):
    """Base of every event; never instantiated."""


class GameCreated(BaseEvent, frozen=True, tag="GameCreated"):
    """A game began; it carries its whole layout, so it always replays on the board it was played on.

    `players` holds None for an open seat (widened from str: every stored game still reads); `closed`
    the seats closed from the start (a next game keeps its previous game's); `open` whether it is listed
    as an open table; `follows` the ended game it is the next game of.
    """

    game_id: str
    players: tuple[str | None, ...]
    layout: Layout
    spectators: Spectators = "public"
    max_placements: int = 1000
    rules_version: int = 1
    open: bool = False
    closed: tuple[int, ...] = ()
    follows: str | None = None


class ChairClaimed(BaseEvent, frozen=True, tag="ChairClaimed"):
    """The token took an empty chair (and every rare-space placement); the seat gained the bonus."""

    seat: int
    space: str
    token: Token
    bonus: Amounts
    doubled: bool = False


class ChairStolen(BaseEvent, frozen=True, tag="ChairStolen"):
    """The token took a held chair; the holder's token went below the line."""

    seat: int
    space: str
    token: Token
    bonus: Amounts
    from_seat: int
    reason: Literal["instrument", "majority"]
    doubled: bool = False


class PlacedBelowLine(BaseEvent, frozen=True, tag="PlacedBelowLine"):
    """The token went below the line; the seat gained its consolation."""

    seat: int
    space: str
    token: Token
    consolation: Amounts
    reason: Literal["instrument_holds", "no_majority", "own_chair"]


class GameEnded(BaseEvent, frozen=True, tag="GameEnded"):
    """The game ended: final scores (as in the view) and the ranking by prestige."""

    seat: int
    scores: tuple[Score, ...]
    ranking: tuple[Rank, ...]


class PlacementTakenBack(BaseEvent, frozen=True, tag="PlacementTakenBack"):
    """The seat took back its placement of `version`, the event just before this one: the game is again
    exactly as it was before that placement (only the version and the count the placement limit reads
    go on)."""

    seat: int
    version: int


class SeatTaken(BaseEvent, frozen=True, tag="SeatTaken"):
    """An open seat's player named themselves (names as domain.names says, unique in the game)."""

    seat: int
    name: str


class SeatClosed(BaseEvent, frozen=True, tag="SeatClosed"):
    """The host closed an open seat before the first placement: it takes no part and is left unranked."""

    seat: int


class SeatTokenReissued(BaseEvent, frozen=True, tag="SeatTokenReissued"):
    """The host gave the seat a new token: `credential` is the new token's SHA-256 (hex), never the token;
    from here on only that token is the seat's."""

    seat: int
    credential: str


class NextGame(BaseEvent, frozen=True, tag="NextGame"):
    """The ended game's next game: the same seats, names, layout, spectators and openness (once only)."""

    game_id: str


Event = (
    GameCreated
    | ChairClaimed
    | ChairStolen
    | PlacedBelowLine
    | GameEnded
    | PlacementTakenBack
    | SeatTaken
    | SeatClosed
    | SeatTokenReissued
    | NextGame
)
PlacementEvent = ChairClaimed | ChairStolen | PlacedBelowLine
