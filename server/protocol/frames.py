"""The websocket frames of protocol.md: what clients send, and what the server answers, encoded once.

Wire frames and domain commands are separate types: a frame never carries a seat; the server turns a
valid frame into the domain's command, adding the seat of the connection's token.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from domain import EndGame, Place
from domain.messages import CommandId, Ref, Skill, Token
from domain.vocabulary import Consolation, Material
from projections import View, ViewDelta

Version = Annotated[int, msgspec.Meta(ge=0)]
# A hello's `view`: "delta" (live frames carry what changed), "full" (the whole view; v1's `true`), false
# (none).
ViewMode = bool | Literal["full", "delta"]


class Hello(msgspec.Struct, frozen=True, tag_field="type", tag="hello"):
    """The first frame: a seat token (or a watch token, or null for a public spectator), the resume point,
    and what live frames carry of the view (`true`, v1's spelling, means "full": see `Session.view`)."""

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

    def command(self, seat: int) -> EndGame:
        """The domain command, with the seat of the connection."""
        return EndGame(seat=seat, id=self.id, expected_version=self.expected_version)


CommandFrame = PlaceFrame | EndGameFrame
ClientFrame = Hello | PlaceFrame | EndGameFrame

decode_frame = msgspec.json.Decoder(ClientFrame).decode
_decode_loose = msgspec.json.Decoder(dict[str, Any]).decode


# Server frames ----------------------------------------------------------------------------------------


class Welcome(msgspec.Struct, frozen=True, tag_field="type", tag="welcome"):
    """The answer to hello: the role, the seat (players), the current version and the view at it."""

    role: Literal["player", "spectator"]
    seat: int | None
    version: int
    view: msgspec.Raw


class Accepted(msgspec.Struct, frozen=True, tag_field="type", tag="accepted"):
    """A command was written: its last version and its envelopes."""

    id: str
    version: int
    events: list[msgspec.Raw]


class RejectedFrame(msgspec.Struct, frozen=True, tag_field="type", tag="rejected"):
    """A command or frame was refused; nothing changed."""

    id: str | None
    code: str
    message: str
    version: int


class EventsFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes of one or more consecutive commands, with the view after the last (live traffic for
    `view: "full"` clients)."""

    envelopes: list[msgspec.Raw]
    # Already encoded, or the live view's struct of encoded spaces (encoded in the frame's own pass: one
    # copy of a view that grows with the game, not two).
    view: msgspec.Raw | msgspec.Struct


class DeltaFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes with what they changed in the view (live traffic for `view: "delta"` clients).

    `view_delta` holds `version`, `ended`, in `added` the tokens each changed space gained (and its First
    Chair), in `spaces` any space that changed otherwise, whole, and in `score_changes` the seats whose
    scores changed: its size follows the change, not the game.
    """

    envelopes: list[msgspec.Raw]
    view_delta: msgspec.Raw | msgspec.Struct


class HistoryFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes without a view: history after a welcome, or live traffic for `view: false` clients."""

    envelopes: list[msgspec.Raw]


class EventsFrameShape(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """What the schema says of an `events` frame: one of EventsFrame, DeltaFrame, HistoryFrame."""

    envelopes: list[msgspec.Raw]
    view: View | None = None
    view_delta: ViewDelta | None = None


ServerFrame = Welcome | Accepted | RejectedFrame | EventsFrameShape

encode = msgspec.json.Encoder().encode


def readable_id(text: str | bytes) -> str | None:
    """The `id` of a frame that failed to decode, when it had a readable string id (for the answer)."""
    try:
        raw = _decode_loose(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        # Deep nesting (10,000 arrays in a field) exhausts the decoder's recursion: no readable id.
        return None
    found = raw.get("id")
    return found if isinstance(found, str) and len(found) <= 256 else None


def rejected(id: str | None, code: str, message: str, version: int) -> bytes:
    """A rejected frame, encoded; never fails, whatever the client put in the id or message."""
    return encode(RejectedFrame(id=id, code=code, message=message, version=version))
