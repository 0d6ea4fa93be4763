"""The websocket frames of protocol.md: what clients send, and what the server answers, encoded once.

Wire frames and domain commands are separate types: a frame never carries a seat; the server turns a
valid frame into the domain's command, adding the seat of the connection's token.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from domain import EndGame, Place, PlayAgain, TakeBack, TakeSeat, patterns
from domain.messages import CommandId, Name, Ref, Seat, Skill, Token
from domain.vocabulary import Consolation, Material
from server.protocol.codes import CODES

Version = Annotated[int, msgspec.Meta(ge=0)]
# JSON encoded elsewhere and sent as it is; the published schema says what it holds.
EnvelopeJson = Annotated[msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": "#/$defs/Envelope"})]
ViewJson = Annotated[msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": "#/$defs/View"})]
Code = Annotated[str, msgspec.Meta(extra_json_schema={"enum": list(CODES)})]
# A hello's `view`: "delta" (live frames carry what changed), "full" (the whole view; v1's `true`), false
# (none).
ViewMode = bool | Literal["full", "delta"]
# What a connection's live frames carry of the view: what changed, the whole view, or nothing.
LiveView = Literal["delta", "full", "none"]
LIVE_VIEWS: dict[ViewMode, LiveView] = {"delta": "delta", "full": "full", True: "full", False: "none"}


class Hello(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type", tag="hello"):
    """The first frame: a seat token (or a watch token, or null for a public spectator), the resume point,
    and what live frames carry of the view (`true`, v1's spelling, means "full"). No other field, as in a
    command."""

    token: str | None = None
    since: Version | None = None
    view: ViewMode = "delta"


class PlaceFrame(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type", tag="place"):
    """A placement, as a client sends it."""

    id: CommandId
    token: Token
    space: Ref
    skill: Skill = 1
    consolation: Consolation = "money"
    materials: tuple[Material, ...] | None = None
    expected_version: Version | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")

    def command(self, seat: int) -> Place:
        """The domain command, with the seat of the connection."""
        return Place(
            seat=seat,
            id=self.id,
            token=self.token,
            space=self.space,
            skill=self.skill,
            consolation=self.consolation,
            materials=self.materials,
            expected_version=self.expected_version,
        )


class EndGameFrame(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type", tag="end_game"):
    """Ending the game, as a client sends it."""

    id: CommandId
    expected_version: Version | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")

    def command(self, seat: int) -> EndGame:
        """The domain command, with the seat of the connection."""
        return EndGame(seat=seat, id=self.id, expected_version=self.expected_version)


class TakeBackFrame(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type", tag="take_back"
):
    """Taking back the sender's own placement while it is the game's last event, as a client sends it."""

    id: CommandId
    expected_version: Version | None = None

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")

    def command(self, seat: int) -> TakeBack:
        """The domain command, with the seat of the connection."""
        return TakeBack(seat=seat, id=self.id, expected_version=self.expected_version)


class TakeSeatFrame(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type", tag="take_seat"
):
    """Naming oneself in the open seat of the connection's token, as a client sends it."""

    id: CommandId
    name: Name

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")

    def command(self, seat: int) -> TakeSeat:
        """The domain command, with the seat of the connection."""
        return TakeSeat(seat=seat, id=self.id, name=self.name)


class PlayAgainFrame(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type", tag="play_again"
):
    """Starting the next game of this ended one (or getting it, once started), as a client sends it."""

    id: CommandId

    def __post_init__(self) -> None:
        patterns.check_end(self.id, patterns.COMMAND_ID, "$.id")

    def command(self, seat: int) -> PlayAgain:
        """The domain command, with the seat of the connection (the next game's id is the server's)."""
        return PlayAgain(seat=seat, id=self.id, game_id="pending")


CommandFrame = PlaceFrame | EndGameFrame | TakeBackFrame | TakeSeatFrame | PlayAgainFrame
ClientFrame = Hello | PlaceFrame | EndGameFrame | TakeBackFrame | TakeSeatFrame | PlayAgainFrame

decode_frame = msgspec.json.Decoder(ClientFrame).decode
_decode_loose = msgspec.json.Decoder(dict[str, Any]).decode


# Server frames ----------------------------------------------------------------------------------------


class Welcome(msgspec.Struct, frozen=True, tag_field="type", tag="welcome"):
    """The answer to hello: the role, the seat (players), the current version and the view at it."""

    role: Literal["player", "spectator"]
    seat: Seat | None
    version: Version
    view: ViewJson


class Accepted(msgspec.Struct, frozen=True, tag_field="type", tag="accepted"):
    """A command was written: its last version and its envelopes."""

    id: CommandId
    version: Version
    events: list[EnvelopeJson]


class RejectedFrame(msgspec.Struct, frozen=True, tag_field="type", tag="rejected"):
    """A command or frame was refused; nothing changed."""

    id: str | None
    code: Code
    message: str
    version: Version


class EventsFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes of one or more consecutive commands, with the view after the last (live traffic for
    `view: "full"` clients)."""

    envelopes: list[EnvelopeJson]
    # Already encoded, or the live view's struct of encoded spaces (encoded in the frame's own pass: one
    # copy of a view that grows with the game, not two).
    view: msgspec.Raw | msgspec.Struct


class DeltaFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes with what they changed in the view (live traffic for `view: "delta"` clients).

    `view_delta` holds `version`, `ended`, in `added` each changed space's First Chair and the end of its
    list (cut where the addition starts, which only a take-back puts before the list's end, then the
    tokens added), in `spaces` a space the view held did not have, whole, and in `score_changes` the seats
    whose scores changed: its size follows the change, not the game.
    """

    envelopes: list[EnvelopeJson]
    view_delta: msgspec.Raw | msgspec.Struct


class HistoryFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes without a view: history after a welcome, or live traffic for `view: false` clients."""

    envelopes: list[EnvelopeJson]


class SeatPresence(msgspec.Struct, frozen=True):
    """Whether a seat has at least one open connection, on any node."""

    seat: Seat
    online: bool


class Presence(msgspec.Struct, frozen=True):
    """Who is at the table now: each seat in seat order, and how many spectator connections watch, on
    every node. Not a fact of the game: it never enters the stream (`GET /games/{id}` carries it too)."""

    seats: list[SeatPresence]
    spectators: Annotated[int, msgspec.Meta(ge=0)]


class PresenceFrame(msgspec.Struct, frozen=True, tag_field="type", tag="presence"):
    """Who is at the table: sent after the welcome, then whenever it changes (at most one a second per
    game)."""

    seats: list[SeatPresence]
    spectators: Annotated[int, msgspec.Meta(ge=0)]


class NextGameFrame(msgspec.Struct, frozen=True, omit_defaults=True, tag_field="type", tag="next_game"):
    """The ended game's next game has started: its id and, for a connection that came with a token (a
    seat's, a private game's watch token, the host's), the token that does the same there (tokens carry
    over to the next game)."""

    game_id: str
    token: str | None = None


encode = msgspec.json.Encoder().encode


def readable_id(text: str | bytes) -> str | None:
    """The `id` of a frame that failed to decode, when it had a readable string id (for the answer)."""
    found = _readable(text, "id")
    return found if isinstance(found, str) and len(found) <= 256 else None


def says_hello(text: str | bytes) -> bool:
    """Whether a frame that failed to decode is a JSON object whose `type` is "hello"."""
    return _readable(text, "type") == "hello"


def _readable(text: str | bytes, field: str) -> object:
    try:
        raw = _decode_loose(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        # Deep nesting (thousands of arrays in a field) exhausts the decoder's recursion: nothing to read.
        return None
    return raw.get(field)


def rejected(id: str | None, code: str, message: str, version: int) -> bytes:
    """A rejected frame, encoded; never fails, whatever the client put in the id or message."""
    return encode(RejectedFrame(id=id, code=code, message=message, version=version))
