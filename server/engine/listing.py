"""The list of public games, read from the store's index, and the backfill of games the index lacks.

A public game is listed at its creation with its listing (its players: what the list shows that never
changes); its version and whether it has ended come from its newest envelope, read when listed. So
`GET /games` reads the listed games alone, never a private one, whatever the number of games.

Games written before the index existed (or created by a node of an older version) are indexed by
`backfill`, which each node runs once it has started: two counts when the index lacks nothing, else a
read of the first and the newest envelope of each game it lacks.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging

import msgspec

from domain import GameCreated, GameEnded, NextGame
from server.engine.presence import PresenceTracker
from server.protocol import envelope
from server.protocol.frames import Presence
from server.store import EventStore, Listed, StoreError

log = logging.getLogger(__name__)

# Games read at once by the backfill.
BACKFILL_BATCH = 64
# Hex digits of a creator's hash kept in a listing (64 bits: two buckets sharing one is no concern).
CREATOR_CHARS = 16


class Listing(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the index keeps of a public game from its creation on: its players, and who created it (a keyed
    hash of the creator's address bucket, `creator_of`: for the wall's share per creator; never shown)."""

    players: list[str | None]  # None: a seat open at the game's creation
    creator: str | None = None
    open: bool = False  # an open table: anyone may join (GET /games/open)


class GameSummary(msgspec.Struct, frozen=True):
    """A game in the list of games (with who is at its table now, in GET /games)."""

    game_id: str
    players: list[str | None]
    version: int
    ended: bool
    presence: Presence | None = None


class _Tag(msgspec.Struct):
    type: str


class _Newest(msgspec.Struct):
    """Of a game's newest envelope, only its event's tag: whether the game has ended. (A tag never
    changes, so no upcasting is needed; the rest, a whole layout for a new game, is skipped unread.)"""

    event: _Tag


_encode = msgspec.json.Encoder().encode
_decode_listing = msgspec.json.Decoder(Listing).decode
_decode_newest = msgspec.json.Decoder(_Newest).decode
# A game has ended when its newest event is its end, or the next game that follows its end.
_ENDED = (GameEnded.__struct_config__.tag, NextGame.__struct_config__.tag)


def listing_of(
    players: list[str | None] | tuple[str | None, ...],
    creator: str | None = None,
    *,
    open_table: bool = False,
) -> bytes:
    """The listing of a public game with these players (and its creator's hash, `creator_of`; whether it
    is an open table)."""
    return _encode(Listing(list(players), creator, open_table))


def listed_open(listed: Listed) -> bool:
    """Whether a listed game was created as an open table."""
    try:
        return _decode_listing(listed.listing).open
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def creator_key(secret: bytes) -> bytes:
    """The key that `creator_of` hashes with, from a secret every node of a store shares (the signing key)."""
    return hashlib.sha256(b"orchestra wall creator\0" + secret).digest()


def creator_of(bucket: str, key: bytes) -> str:
    """What the index keeps of a creator's address bucket (server.web.throttle.client_key): a keyed hash,
    so that no address can be read back from the index, even by trying every one."""
    return hmac.new(key, bucket.encode(), hashlib.sha256).hexdigest()[:CREATOR_CHARS]


def listed_creator(listed: Listed) -> str | None:
    """The creator's hash a listed game was listed with; None for a game listed without one (created
    before creators were kept) or whose listing does not decode."""
    try:
        return _decode_listing(listed.listing).creator
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def summary_of(listed: Listed) -> GameSummary | None:
    """The summary of a listed game; None when its listing or newest envelope does not decode."""
    try:
        players = _decode_listing(listed.listing).players
        ended = _decode_newest(listed.last.data).event.type in _ENDED
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # one damaged game must not hide every other one
    return GameSummary(listed.game_id, players, listed.last.version, ended)


async def summaries(
    store: EventStore, limit: int, presence: PresenceTracker | None = None
) -> list[GameSummary]:
    """The newest `limit` public games, newest first; with `presence`, each with its presence now (read
    in one more call). Raises: StoreUnavailable."""
    found = [summary_of(listed) for listed in await store.listed(limit)]
    games = [summary for summary in found if summary is not None]
    if presence is None or not games:
        return games
    now = await presence.of([(game.game_id, len(game.players)) for game in games])
    return [msgspec.structs.replace(game, presence=p) for game, p in zip(games, now, strict=True)]


async def backfill(store: EventStore) -> int:
    """Index every game the store's index lacks; how many were indexed.

    A game that cannot be read is left for the next run. Raises: StoreUnavailable.
    """
    missing = await store.unindexed()
    indexed = 0
    for start in range(0, len(missing), BACKFILL_BATCH):
        done = await asyncio.gather(*(_index_one(store, g) for g in missing[start : start + BACKFILL_BATCH]))
        indexed += sum(done)
    return indexed


async def _index_one(store: EventStore, game_id: str) -> bool:
    first = await store.read(game_id, 0, 1)
    newest = await store.read(game_id, max(0, await store.version(game_id) - 1))
    if not first or not newest:
        return False  # deleted meanwhile
    try:
        created = envelope.decode(first[0].data).event
        last = envelope.decode(newest[-1].data).event
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("game not indexed: unreadable", extra={"game_id": game_id, "error": str(exc)})
        return False
    if not isinstance(created, GameCreated):
        return False
    listing = listing_of(created.players, open_table=created.open) if created.spectators == "public" else None
    await store.index(game_id, listing=listing, live=not isinstance(last, GameEnded | NextGame))
    return True


async def backfill_logged(store: EventStore) -> None:
    """`backfill`, logged; a store error is logged too (the next start tries again)."""
    try:
        count = await backfill(store)
    except StoreError as exc:
        log.warning("games index backfill interrupted", extra={"error": str(exc)})
        return
    if count:
        log.info("games index backfilled", extra={"count": count})
