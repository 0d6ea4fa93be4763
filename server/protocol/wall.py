"""The frames of the wall feed (`/wall/ws`, protocol.md): every public game on the wall once, whole, then
only what changed.

The server sends two frames and takes none: `wall` first (every game on the wall, whole), then
`wall_changes` (the games added, whole; of each game that changed, only its changed fields, and of its
chairs only the spaces whose holders changed; the games retired). A change applies to what the client holds
from the frames before it, so a client that lost its connection connects again and starts from a new
`wall`.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

from domain import Layout
from domain.messages import Seat
from server.protocol.frames import Presence, Version

Prestige = Annotated[int, msgspec.Meta(ge=0)]


class WallGame(msgspec.Struct, frozen=True):
    """A game on the wall, whole: its players in seat order, its layout (to draw its board), its version,
    whether it has ended, each space's First Chair holders (`chairs`: a standard space's holder, or none; a
    rare space's holders, oldest first), each seat's prestige, in seat order, and who is at the table
    (`presence`, as the presence frame and GET /games/{id} say it)."""

    game_id: str
    players: list[str]
    layout: Layout
    version: Version
    ended: bool
    chairs: dict[str, list[Seat]]
    prestige: list[Prestige]
    presence: Presence


class WallChange(msgspec.Struct, frozen=True):
    """What changed in a game on the wall: only the fields that changed are there (the others are left
    out, never null), and in `chairs` only the spaces whose holders changed (each whole); `prestige` comes
    whole when any seat's changed, and `presence` whole when it changed."""

    game_id: str
    version: Version | UnsetType = UNSET
    ended: bool | UnsetType = UNSET
    chairs: dict[str, list[Seat]] | UnsetType = UNSET
    prestige: list[Prestige] | UnsetType = UNSET
    presence: Presence | UnsetType = UNSET


class WallFrame(msgspec.Struct, frozen=True, tag_field="type", tag="wall"):
    """The first frame of the wall feed: every game on the wall, whole (live games newest first, then the
    ended ones, most recently ended first), and how many ended games the wall keeps."""

    games: list[WallGame]
    ended_kept: Annotated[int, msgspec.Meta(ge=0)]


class WallChangesFrame(msgspec.Struct, frozen=True, tag_field="type", tag="wall_changes"):
    """What changed on the wall since the frame before: games `retired` (their ids), games `added`
    (whole, newest first: they go before the games held), and games `changed`. No game is in two lists."""

    retired: list[str]
    added: list[WallGame]
    changed: list[WallChange]


WALL_FRAMES = (WallFrame, WallChangesFrame)
