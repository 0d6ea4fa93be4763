"""Archiving a finished game: fence it, export its envelopes to NDJSON, verify the file, then delete it.

The game is fenced first: from then on its commands are refused (`archiving`), so nothing can be accepted
that the file would miss. The stream is deleted only after the file on disk is read back and found
byte-identical to the stream and valid (signatures, hash chain, versions, rules), and only if the game is
still at the archived version, in one atomic step: an archive never costs a game or an acknowledged
command. An archive that fails lifts the fence.
The file holds the stored bytes, signatures included, so it verifies offline (`orchestra verify --file`),
and, when this machine has the signing key, a signed trailer stating its last version.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

from domain import GameEnded
from server.clock import utc_now
from server.engine import envelope
from server.engine.signing import Keyring, Signer
from server.engine.trailer import trailer_line
from server.ops.verify import verify
from server.store import ConcurrencyConflict, EventStore, StoreError


class ArchiveError(Exception):
    """The game was not archived; nothing was deleted."""


class Archived(msgspec.Struct, frozen=True):
    """A game archived to `path`: its envelope count and the file's size."""

    game_id: str
    path: str
    envelopes: int
    bytes: int


async def archive(
    store: EventStore,
    game_id: str,
    path: Path,
    *,
    keys: Keyring,
    signer: Signer | None = None,
    force: bool = False,
    allow_unsigned: bool = False,
) -> Archived:
    """Export `game_id` to `path`, verify the file with the public keys `keys`, and only then delete the
    game from the store. With `signer` (the servers' key, when this machine has it), the file ends with a
    signed trailer stating its last version. `allow_unsigned`: accept envelopes recorded before signing.

    Raises: ArchiveError (unknown or unfinished game, a file that does not verify), StoreUnavailable.
    """
    if not await store.fence(game_id):
        raise ArchiveError(f"no game {game_id!r}")
    try:
        archived = await _export_and_delete(
            store, game_id, path, keys=keys, signer=signer, force=force, allow_unsigned=allow_unsigned
        )
    except BaseException:
        with contextlib.suppress(StoreError):
            await store.unfence(game_id)
        raise
    return archived


async def _export_and_delete(
    store: EventStore,
    game_id: str,
    path: Path,
    *,
    keys: Keyring,
    signer: Signer | None,
    force: bool,
    allow_unsigned: bool,
) -> Archived:
    records = await store.read(game_id)
    if not records:
        raise ArchiveError(f"no game {game_id!r}")
    if not force and not isinstance(envelope.decode(records[-1].data).event, GameEnded):
        raise ArchiveError(f"game {game_id!r} has not ended (use --force to archive it anyway)")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(r.data + b"\n" for r in records)
    if signer is not None:
        data += trailer_line(game_id, records, utc_now(), signer) + b"\n"
    with open(path, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    lines = path.read_bytes().splitlines()
    if lines[: len(records)] != [r.data for r in records] or len(lines) != len(records) + (
        signer is not None
    ):
        raise ArchiveError(f"{path} does not read back as the stream; the game was kept")
    report = verify(lines, keys=keys, game_id=game_id, allow_unsigned=allow_unsigned, complete=not force)
    if not report.ok:
        raise ArchiveError(f"the stream does not verify at version {report.bad_version}: {report.problem}")
    # The fence stops every later append; deleting only at the archived version, atomically, makes sure.
    try:
        await store.delete(game_id, len(records))
    except ConcurrencyConflict:
        raise ArchiveError(f"game {game_id!r} moved on during the export; the game was kept") from None
    return Archived(game_id=game_id, path=str(path), envelopes=len(records), bytes=len(data))
