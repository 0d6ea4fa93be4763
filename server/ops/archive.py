"""Archiving a finished game: fence it, export its envelopes to NDJSON, verify the file, then delete it.

The game is fenced first: from then on its commands are refused (`archiving`), so nothing can be accepted
that the file would miss. The stream is deleted only after the file on disk is read back and found
byte-identical to the stream and valid (signatures, hash chain, versions, rules), and only if the game is
still at the archived version, in one atomic step: an archive never costs a game or an acknowledged
command. An archive that fails lifts the fence.
The file holds the stored bytes, signatures included, so it verifies offline (`orchestra verify --file`),
and, when this machine has the signing key, a signed trailer stating its last version and carrying the
game's credential hashes (so `orchestra import` can bring the game back whole).

The file is written beside its place and renamed into it once verified, so FILE is either absent, as it
was, or a verified archive. It is created new (O_EXCL|O_NOFOLLOW, relative to its folder), mode 0600, in a
folder made 0700: a link planted in its way is refused, never written through, and the game is kept. A
run stopped between the file and the delete (killed, say) leaves the game fenced with its file in place:
the same archive again finds the file holding the stream and verified, and only deletes the game; one
stopped inside the delete, between the game's keys and its index entries, is finished by archiving the
game again (it answers that there is no such game, and leaves no entry).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import msgspec

from domain import GameEnded, NextGame
from server.clock import utc_now
from server.engine.signing import Keyring, Signer
from server.engine.trailer import TRAILER_START, trailer_line
from server.ops.files import FileTooLarge, LinkRefused, NotRegularFile, kind_of, read_bounded
from server.ops.verify import verify
from server.protocol import envelope
from server.store import ConcurrencyConflict, EventStore, StoreError


class ArchiveError(Exception):
    """The game was not archived; nothing was deleted."""


class Archived(msgspec.Struct, frozen=True):
    """A game archived to `path`: its envelope count and the file's size."""

    game_id: str
    path: str
    envelopes: int
    bytes: int
    reused: bool = False  # the file was in place already (from a run stopped before its delete)


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
    signed trailer stating its last version and carrying the game's credential hashes. `allow_unsigned`:
    accept envelopes recorded before signing.

    Raises: ArchiveError (unknown or unfinished game, a file that does not verify, a link or another
    kind of file in the way), StoreUnavailable, OSError.
    """
    try:
        if not await store.fence(game_id):
            # A delete stopped between the game's keys and its entries in the index (two calls) leaves
            # the entries: a game counted live that no longer exists. Archiving it again finishes that.
            await store.delete(game_id)
            raise ArchiveError(f"no game {game_id!r}")
        archived = await _export_and_delete(
            store,
            game_id,
            path,
            keys=keys,
            signer=signer,
            force=force,
            allow_unsigned=allow_unsigned,
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
    if not force and not isinstance(envelope.decode(records[-1].data).event, GameEnded | NextGame):
        raise ArchiveError(f"game {game_id!r} has not ended (use --force to archive it anyway)")
    stored = [r.data for r in records]

    def check(lines: list[bytes]) -> str | None:
        """Why `lines` are not a verified archive of the stream, or None."""
        if _without_trailer(lines) != stored:
            return "does not hold the stream's envelopes"
        report = verify(lines, keys=keys, game_id=game_id, allow_unsigned=allow_unsigned, complete=not force)
        if not report.ok:
            return f"the stream does not verify at version {report.bad_version}: {report.problem}"
        return None

    existing = _read(path)
    reused = existing is not None and check(existing) is None
    if reused:
        size = path.stat().st_size
    else:
        data = b"".join(line + b"\n" for line in stored)
        if signer is not None:
            credentials = await store.credentials(game_id)
            data += trailer_line(game_id, records, utc_now(), signer, credentials) + b"\n"
        size = len(data)
        # In a thread: the fsyncs wait for the disk, and a bulk archive verifies other games meanwhile.
        await asyncio.to_thread(_write_verified, path, data, check)
    # The fence stops every later append; deleting only at the archived version, atomically, makes sure.
    try:
        await store.delete(game_id, len(records))
    except ConcurrencyConflict:
        raise ArchiveError(f"game {game_id!r} moved on during the export; the game was kept") from None
    return Archived(game_id=game_id, path=str(path), envelopes=len(records), bytes=size, reused=reused)


def _without_trailer(lines: list[bytes]) -> list[bytes]:
    return lines[:-1] if lines and lines[-1].startswith(TRAILER_START) else lines


def _read(path: Path) -> list[bytes] | None:
    """The lines of the file already at `path` (None when there is none); a link there is not followed."""
    try:
        return read_bounded(path, follow=False).splitlines()
    except FileNotFoundError:
        return None
    except (LinkRefused, NotRegularFile, FileTooLarge) as exc:
        raise ArchiveError(f"{path}: {exc}, in the way of the archive; the game was kept") from None


def _write_verified(path: Path, data: bytes, check: Callable[[list[bytes]], str | None]) -> None:
    """Write `data` beside `path` (a new 0600 file), read it back and `check` it, then rename it into place
    durably. Everything happens relative to the folder's descriptor, and the file is created with
    O_EXCL|O_NOFOLLOW: a link planted under the partial file's name is refused, never written through."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    part = f".{path.name}.part"
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _create(folder, part, path.parent)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
                written = os.pread(fd, len(data) + 1, 0)  # the file created, not whatever the name holds now
            finally:
                os.close(fd)
            problem = "does not read back as written" if written != data else check(written.splitlines())
            if problem is not None:
                raise ArchiveError(f"{path}: {problem}; the game was kept")
            os.replace(part, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(part, dir_fd=folder)
            raise
        # The rename is durable once the directory is: only then may the game leave the store.
        os.fsync(folder)
    finally:
        os.close(folder)


def _create(folder: int, name: str, where: Path) -> int:
    """A new file `name` in `folder`, mode 0600, open for reading and writing. A regular file of that name
    is a leftover of a stopped write and is replaced; anything else there is refused (ArchiveError)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(2):
        try:
            fd = os.open(name, flags, 0o600, dir_fd=folder)
        except FileExistsError:
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
            if not stat.S_ISREG(mode):
                raise ArchiveError(
                    f"{where / name} is {kind_of(mode)}: refusing to write the archive through it; the game "
                    "was kept"
                ) from None
            os.unlink(name, dir_fd=folder)
            continue
        os.fchmod(fd, 0o600)  # the umask may only have narrowed it; never wider
        return fd
    raise ArchiveError(f"{where / name} keeps coming back: the archive was not written; the game was kept")
