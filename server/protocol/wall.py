"""The frames of the wall feed (`/wall/ws`, protocol.md): a page of the wall's games, whole, then only what
changed of the games a subscriber holds.

The server sends `wall` first (the first page: the most active games, whole, and how many the wall shows),
then `wall_changes` (of the games the subscriber holds: those retired, those changed, only their changed
fields and of their chairs only the spaces whose holders changed; and the games added to what it holds,
whole). The client may ask for more with `wall_more`, answered by a `wall_page` (the next games it does not
hold, whole). A change applies to what the client holds from the frames before it, so a client that lost its
connection connects again and starts from a new `wall`.
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
    players: list[str | None]  # None: a seat still open
    layout: Layout
    version: Version
    ended: bool
    chairs: dict[str, list[Seat]]
    prestige: list[Prestige]
    presence: Presence


class WallChange(msgspec.Struct, frozen=True):
    """What changed in a game on the wall: only the fields that changed are there (the others are left
    out, never null), and in `chairs` only the spaces whose holders changed (each whole); `prestige` comes
    whole when any seat's changed, `presence` whole when it changed, and `players` whole when an open seat
    was taken."""

    game_id: str
    version: Version | UnsetType = UNSET
    ended: bool | UnsetType = UNSET
    chairs: dict[str, list[Seat]] | UnsetType = UNSET
    prestige: list[Prestige] | UnsetType = UNSET
    presence: Presence | UnsetType = UNSET
    # An open seat taken: the names, whole (None: a seat still open).
    players: list[str | None] | UnsetType = UNSET


Total = Annotated[int, msgspec.Meta(ge=0)]


class WallFrame(msgspec.Struct, frozen=True, tag_field="type", tag="wall"):
    """The first frame of the wall feed: the first page of the wall, whole (its most active games, in the
    wall's order: live games newest first, then the ended ones, most recently ended first), how many ended
    games the wall keeps, and how many games it shows in all (`total`: more than `games` holds when there
    are more pages)."""

    games: list[WallGame]
    ended_kept: Annotated[int, msgspec.Meta(ge=0)]
    total: Total


class WallChangesFrame(msgspec.Struct, frozen=True, tag_field="type", tag="wall_changes"):
    """What changed since the frame before, of the games the subscriber holds: games `retired` (their
    ids), games `added` to what it holds (whole: they go before the games held), and games `changed`; and
    how many games the wall shows now. No game is in two lists."""

    retired: list[str]
    added: list[WallGame]
    changed: list[WallChange]
    total: Total


class WallPageFrame(msgspec.Struct, frozen=True, tag_field="type", tag="wall_page"):
    """The answer to `wall_more`: the next games the subscriber did not hold (the most active of them, at
    most a page, in the wall's order: they go after the games held; none when it holds every game), and
    how many games the wall shows."""

    games: list[WallGame]
    total: Total


class WallMore(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type", tag="wall_more"):
    """The one frame a client sends the wall feed: another page, please (answered by `wall_page`)."""


WALL_FRAMES = (WallFrame, WallChangesFrame, WallPageFrame, WallMore)
