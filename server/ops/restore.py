"""Importing an archived game: its file checked as `orchestra verify --file` checks it, then written back.

The file must verify (signatures, hash chain, versions, every event decided again; and complete: ending
with the game's signed end or a signed trailer, unless `complete=False`), or nothing is written. The game
is then written whole in one atomic step (`EventStore.restore`): its envelopes as they were, byte for
byte, so the game exports, replays and verifies as before; its command records, rebuilt from the
envelopes (each command's key is its seat and id, and its versions are those of the envelopes that carry
them), so a repeat of a command the game accepted still gets its first answer; and its credentials, from
the archive's signed trailer. It is indexed as a created game is: listed if public, in its place by its
creation time, and counted live only if it has not ended.

Credentials: an archive made with the signing key carries the hashes of the game's seat and watch tokens
in its trailer (under the signature), and the game comes back with them: its tokens work as before. A
file without them (an archive made without the key, an export) brings back an ended public game that
anyone can read (an ended game takes no command anyway). It is refused for a private game, since no one
could read it, and for a game that has not ended, since no one could play or end it: a game in play comes
back only from a signed archive (`archive --force`), with its seats' tokens.

A file whose newest signature (its trailer's, else its last envelope's) is a retired key's is refused:
nothing newer vouches for it, and anyone holding a copy of that key forges such a file, dated before the
retirement. With `retired_before` (`--allow-retired-before DATE`, the operator's word that the key was
still secret then) it is imported when every one of its lines is dated before that time.

An id already in the store is refused, unless the store holds exactly the file's envelopes (the game was
imported already: a rerun skips it, so an interrupted import resumes), or `skip_existing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from enum import Enum

import msgspec

from domain import GameCreated
from server import auth
from server.engine.listing import listing_of
from server.engine.signing import Keyring, parse_time, time_text
from server.engine.trailer import TRAILER_START, trailer_credentials
from server.ops.verify import verify
from server.protocol import envelope
from server.store import EventStore, GameExists

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class RestoreError(Exception):
    """The file was not imported; nothing was written. `bad_version`: the first bad version, when the
    file does not verify."""

    def __init__(self, message: str, bad_version: int | None = None) -> None:
        super().__init__(message)
        self.bad_version = bad_version


class Result(Enum):
    """What an import did with a file's game."""

    IMPORTED = "imported"
    PRESENT = "present"  # the store holds the same envelopes already: imported before
    SKIPPED = "skipped"  # another game with this id is in the store (skip_existing)


class Restored(msgspec.Struct, frozen=True):
    """A file's game, what became of it, whether it has ended and came with its credentials."""

    game_id: str
    envelopes: int
    result: Result
    ended: bool = False
    credentials: bool = False


class _CommandFields(msgspec.Struct, frozen=True):
    """Of an envelope, what the command records need (its event is skipped unread)."""

    version: int
    command_id: str | None = None
    seat: int | None = None


_decode_command_fields = msgspec.json.Decoder(_CommandFields).decode


class _Dated(msgspec.Struct, frozen=True):
    """Of an envelope or a trailer, its time."""

    at: str


_decode_dated = msgspec.json.Decoder(_Dated).decode


def commands_of(lines: Sequence[bytes]) -> dict[str, tuple[int, int]]:
    """The command records of a game's envelopes: command key ("<seat>:<id>", as the engine keys a
    command) -> the first and last version of its envelopes. Version 1, the creation, has none."""
    commands: dict[str, tuple[int, int]] = {}
    key: str | None = None
    for line in lines[1:]:
        fields = _decode_command_fields(line)
        if fields.command_id is None:
            key = None
            continue
        this = f"{fields.seat}:{fields.command_id}"
        if this == key:
            first, _ = commands[this]
            commands[this] = (first, fields.version)
        elif this not in commands:  # a key accepted once: its first outcome is the one recorded
            commands[this] = (fields.version, fields.version)
            key = this
        else:
            key = None
    return commands


def created_micros(at: str) -> int | None:
    """An envelope's time in microseconds since the epoch; None when it does not parse."""
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // timedelta(microseconds=1)


async def restore(
    store: EventStore,
    lines: Sequence[bytes],
    *,
    keys: Keyring,
    allow_unsigned: bool = False,
    complete: bool = True,
    skip_existing: bool = False,
    max_live: int = 0,
    retired_before: datetime | None = None,
) -> Restored:
    """Import the game of an archive's `lines` (its envelopes, then maybe its trailer) into `store`.
    `retired_before`: accept a file last signed by a retired key when all its lines are dated before it.

    Raises: RestoreError (the file does not verify, or its id is another game's), TooManyGames (a game
    in play into a store at `max_live` live games), StoreFull, StoreUnavailable.
    """
    try:
        report = verify(lines, keys=keys, allow_unsigned=allow_unsigned, complete=complete)
    except RecursionError:
        raise RestoreError("INVALID: a line is nested too deeply to read") from None
    if not report.ok:
        where = f" at version {report.bad_version}" if report.bad_version else ""
        raise RestoreError(f"INVALID{where}: {report.problem}", report.bad_version)
    if report.retired_key is not None:
        _vouched(lines, report.retired_key, keys, retired_before)
    trailer = lines[-1] if lines[-1].startswith(TRAILER_START) else None
    stream = list(lines[:-1] if trailer is not None else lines)
    first = envelope.decode(stream[0])
    created = first.event
    assert isinstance(created, GameCreated)  # verify checked it
    game_id = first.game_id
    listing = listing_of(created.players, open_table=created.open) if created.spectators == "public" else None
    credentials = trailer_credentials(trailer) if trailer is not None else {}
    if created.spectators != "public" and auth.WATCH not in credentials:
        raise RestoreError(
            f"game {game_id!r} is private and the file carries no credentials (an archive made without the "
            "signing key): no one could read it"
        )
    seats = [auth.seat_key(seat) for seat in range(len(created.players))]
    if not report.ended and any(seat not in credentials for seat in seats):
        if not await store.version(game_id):  # nothing to compare with: it would come back unplayable
            raise RestoreError(
                f"game {game_id!r} has not ended and the file does not carry its seats' credentials (an "
                "export, or an archive made without the signing key): it would come back as a game in play "
                "that no one can play or end; only a signed archive brings back a game in play"
            )
    try:
        await store.restore(
            game_id,
            stream,
            credentials,
            commands_of(stream),
            listing=listing,
            live=not report.ended,
            created=created_micros(first.at),
            max_live=max_live,
        )
    except GameExists:
        if [record.data for record in await store.read(game_id)] == stream:
            # Imported before (perhaps by a run stopped before its index entry): index it, idempotently.
            await store.index(game_id, listing=listing, live=not report.ended)
            return Restored(game_id, len(stream), Result.PRESENT, report.ended, bool(credentials))
        if skip_existing:
            return Restored(game_id, len(stream), Result.SKIPPED, report.ended, bool(credentials))
        raise RestoreError(
            f"game {game_id!r} exists, with another history (--skip-existing to skip it)"
        ) from None
    return Restored(game_id, len(stream), Result.IMPORTED, report.ended, bool(credentials))


def _vouched(lines: Sequence[bytes], kid: str, keys: Keyring, before: datetime | None) -> None:
    """Refuse a file last signed by retired key `kid` unless each of its lines is dated before `before`.

    Raises: RestoreError.
    """
    retired = keys.retired_at(kid)
    assert retired is not None  # what Report.retired_key names
    if before is None:
        raise RestoreError(
            f"last signed by the retired key {kid} (retired at {time_text(retired)}): a copy of that key "
            "forges such a file; import it with --allow-retired-before DATE, a time the key was still secret"
        )
    for version, line in enumerate(lines, start=1):
        try:
            at = _decode_dated(line).at
            late = parse_time(at) >= before
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
            at, late = "?", True
        if late:
            raise RestoreError(
                f"INVALID at version {version}: dated {at[:40]}, not before {time_text(before)} "
                f"(--allow-retired-before), and last signed by the retired key {kid}",
                version,
            )
