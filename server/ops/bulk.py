"""Archive, import and verify many games at once, with progress, a summary and an exit status.

Each game is handled alone, exactly as the one-game command handles it, so a failure costs that game
only and the run goes on. Ctrl-C once lets the games at hand finish and stops (exit 130); twice stops at
once, and each game at hand is left as an interrupted one-game command leaves it. Either way the same
command again resumes without losing or doubling a game:

- archive: the games still in the store are the ones left to do. A game fenced by the stopped run is
  archived like any other; one whose verified file is in the folder already (the run stopped between the
  file and the delete) is only deleted, and one whose delete stopped before its index entry went is taken
  out of the index. A file is renamed into the folder only once verified, so the folder never holds a
  partial one (`.<id>.ndjson.part` files are leftovers of a stopped write, replaced by the next).
- import: a game the store holds already with exactly the file's envelopes was imported by the stopped
  run: it is skipped (and indexed, should the run have stopped before its index entry).
- verify: reads only; run it again.

Games are handled a few at a time (`AT_ONCE`), so that one game's disk and Redis waits overlap another's
checking; each is still archived or imported alone, as the one-game command does it, under a lease on the
store (`Stores`), so that a server starting on the data dir meanwhile takes it over between games.

A file is read only when it is a regular file, and only so much of it (server.ops.files): a FIFO or a
device is skipped and named, a file too large or nested too deeply fails, as does anything else one file
raises, and the run goes on.

Exit status: 0 when every item succeeded (or was skipped), 1 when any failed, 130 when interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from domain import GameEnded
from server.engine.signing import Keyring, Signer
from server.ops.archive import ArchiveError, archive
from server.ops.files import NotRegularFile, read_lines
from server.ops.progress import Outcome, Progress
from server.ops.restore import RestoreError, Result, restore
from server.ops.verify import Report, verify
from server.protocol import envelope
from server.store import EventStore, StoreError

# Games whose newest envelope is read at once when listing the ended ones.
LIST_BATCH = 64
# Games archived or imported at once.
AT_ONCE = 8
# What a game id must look like to name a file (the server's ids are URL-safe base64).
_FILE_SAFE = re.compile(r"[A-Za-z0-9_-]{1,128}")
_T = TypeVar("_T")


def parse_date(text: str) -> datetime:
    """A date (`2025-01-31`: its midnight, UTC) or an ISO 8601 time (UTC unless it says otherwise).

    Raises: ValueError.
    """
    when = datetime.fromisoformat(text.strip())
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def files_of(paths: Sequence[Path]) -> list[Path]:
    """The files named, a directory standing for its `*.ndjson` files (in name order)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.glob("*.ndjson") if not p.name.startswith("."))
        else:
            found.append(path)
    return found


def checked(lines: Sequence[bytes], *, keys: Keyring, allow_unsigned: bool, complete: bool) -> Report:
    """`verify` of a file's lines, a line nested too deeply to decode reported as a bad file."""
    try:
        return verify(lines, keys=keys, allow_unsigned=allow_unsigned, complete=complete)
    except RecursionError:
        return Report(ok=False, envelopes=0, problem="a line is nested too deeply to read")


class Stores(Protocol):
    """Where a bulk run gets its store: a lease for each unit of work (server.ops.local_store)."""

    def lease(self) -> AbstractAsyncContextManager[EventStore]:
        """The store, held for one unit of work."""
        ...


class OneStore:
    """A store that never changes hands, as `Stores`."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[EventStore]:
        """The store."""
        yield self._store


async def ended_games(store: EventStore, before: datetime | None = None) -> tuple[list[str], list[str]]:
    """The games whose newest envelope is their signed end, oldest first (with `before`, only those that
    ended before it); and the games listed whose stream is gone (a delete stopped before its index entry
    went). Raises: StoreUnavailable."""
    ids = await store.games()
    ended: list[str] = []
    gone: list[str] = []
    for start in range(0, len(ids), LIST_BATCH):
        batch = ids[start : start + LIST_BATCH]
        for game_id, newest in zip(
            batch, await asyncio.gather(*(_newest(store, g) for g in batch)), strict=True
        ):
            if newest is None:
                gone.append(game_id)
            elif (at := _ended_at(newest)) is not None and (before is None or at < before):
                ended.append(game_id)
    return ended, gone


async def _newest(store: EventStore, game_id: str) -> bytes | None:
    version = await store.version(game_id)
    newest = await store.read(game_id, version - 1) if version else []
    return newest[-1].data if newest else None


def _ended_at(newest: bytes) -> datetime | None:
    try:
        item = envelope.decode(newest)
        return parse_date(item.at) if isinstance(item.event, GameEnded) else None
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return None  # a damaged game is not archived in bulk: `orchestra verify` names what is wrong


class _Interrupt:
    """Ctrl-C during an async bulk run: the first press asks the run to stop after the item at hand,
    the second cancels it at once."""

    def __init__(self, progress: Progress, item: str) -> None:
        self.requested = False
        self._progress, self._item = progress, item
        self._task = asyncio.current_task()

    def _press(self) -> None:
        if self.requested:
            if self._task is not None:
                self._task.cancel()
            return
        self.requested = True
        self._progress.note(
            f"Ctrl-C: stopping once the {self._item} at hand are done (again to stop at once)"
        )

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Interrupt]:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self._press)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            yield self
            return
        try:
            yield self
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    def cancelled(self) -> None:
        """The run was cancelled by a second press: let the rest of it (closing the store) run."""
        if self._task is not None:
            self._task.uncancel()


async def archive_all(
    stores: Stores,
    out_dir: Path,
    progress: Progress,
    *,
    keys: Keyring,
    signer: Signer | None,
    before: datetime | None = None,
    allow_unsigned: bool = False,
) -> int:
    """Archive every ended game (that ended before `before`) into `out_dir`/<id>.ndjson; the exit status.

    Raises: StoreUnavailable (listing the games).
    """
    interrupt = _Interrupt(progress, "games")

    async def one(game_id: str) -> None:
        if not _FILE_SAFE.fullmatch(game_id):
            _failed(progress, game_id, "an id that cannot name a file; archive it alone with --out")
            return
        try:
            async with stores.lease() as store:
                done = await archive(
                    store,
                    game_id,
                    out_dir / f"{game_id}.ndjson",
                    keys=keys,
                    signer=signer,
                    allow_unsigned=allow_unsigned,
                )
        except (ArchiveError, StoreError, OSError) as exc:
            _failed(progress, game_id, f"not archived: {exc}")
            return
        how = "archived (its verified file was in place)" if done.reused else "archived"
        progress.step(game_id, Outcome.DONE, f"{how}: {done.envelopes} envelopes, {done.bytes} bytes")

    with interrupt.installed():
        async with stores.lease() as store:
            candidates, gone = await ended_games(store, before)
            for game_id in gone:  # an archive stopped between its delete and its index entry's: finish it
                await store.delete(game_id)
        progress.begin(len(candidates))
        await _each(candidates, one, interrupt)
    progress.interrupted = progress.handled < progress.total
    return progress.finish()


async def import_all(
    stores: Stores,
    files: Sequence[Path],
    progress: Progress,
    *,
    keys: Keyring,
    allow_unsigned: bool = False,
    complete: bool = True,
    skip_existing: bool = False,
    max_live: int = 0,
    retired_before: datetime | None = None,
) -> int:
    """Import the game of each file (`retired_before`: as `restore` takes it); the exit status."""
    interrupt = _Interrupt(progress, "files")

    async def one(path: Path) -> None:
        name = str(path)
        try:
            lines = read_lines(path)
        except NotRegularFile as exc:
            _skipped(progress, name, f"skipped: {exc}")
            return
        except OSError as exc:
            _failed(progress, name, f"cannot read: {exc}")
            return
        if not lines:
            _failed(progress, name, "empty: no envelopes")
            return
        try:
            async with stores.lease() as store:
                done = await restore(
                    store,
                    lines,
                    keys=keys,
                    allow_unsigned=allow_unsigned,
                    complete=complete,
                    skip_existing=skip_existing,
                    max_live=max_live,
                    retired_before=retired_before,
                )
        except (RestoreError, StoreError, OSError) as exc:
            _failed(progress, name, str(exc))
            return
        except Exception as exc:  # whatever one file does to its import costs that file only
            _failed(progress, name, f"not imported: {type(exc).__name__}: {exc}")
            return
        if done.result is Result.IMPORTED:
            seats = "its tokens work as before" if done.credentials else "no credentials in the file"
            message = f"game {done.game_id} imported: {done.envelopes} envelopes, {seats}"
            progress.step(name, Outcome.DONE, message)
        elif done.result is Result.PRESENT:
            progress.step(name, Outcome.SKIPPED, f"game {done.game_id} is in the store already, the same")
        else:
            message = f"game {done.game_id} exists, with another history: skipped"
            progress.step(name, Outcome.SKIPPED, message)

    with interrupt.installed():
        progress.begin(len(files))
        await _each(files, one, interrupt)
    progress.interrupted = progress.handled < progress.total
    return progress.finish()


async def _each(items: Iterable[_T], work: Callable[[_T], Awaitable[None]], interrupt: _Interrupt) -> None:
    """`work` on each item in turn, AT_ONCE at a time, until done or interrupted. A second Ctrl-C cancels
    the items at hand (each leaves what its one-game command would leave) and ends the run."""
    pending = iter(items)  # shared by the workers: each item is taken once

    async def worker() -> None:
        for item in pending:
            if interrupt.requested:
                return
            await work(item)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(AT_ONCE):
                group.create_task(worker())
    except asyncio.CancelledError:
        interrupt.cancelled()


def verify_all(
    files: Sequence[Path],
    progress: Progress,
    *,
    keys: Keyring,
    allow_unsigned: bool = False,
    complete: bool = True,
) -> int:
    """Check each file as `orchestra verify --file` does; each bad file is reported with its first bad
    version. The exit status."""
    progress.begin(len(files))
    try:
        for path in files:
            name = str(path)
            try:
                lines = read_lines(path)
            except NotRegularFile as exc:
                _skipped(progress, name, f"skipped: {exc}")
                continue
            except OSError as exc:
                _failed(progress, name, f"cannot read: {exc}")
                continue
            try:
                report = checked(lines, keys=keys, allow_unsigned=allow_unsigned, complete=complete)
            except Exception as exc:  # whatever one file does to its check costs that file only
                _failed(progress, name, f"cannot check: {type(exc).__name__}: {exc}")
                continue
            if report.ok:
                state = "ended" if report.ended else "complete as exported" if report.trailer else "open"
                progress.step(name, Outcome.DONE, f"{report.envelopes} envelopes verified ({state})")
            else:
                where = f" at version {report.bad_version}" if report.bad_version else ""
                _failed(progress, name, f"INVALID{where}: {report.problem}")
    except KeyboardInterrupt:
        pass
    progress.interrupted = progress.handled < progress.total
    return progress.finish()


def _failed(progress: Progress, name: str, message: str) -> None:
    progress.step(name, Outcome.FAILED, message)
    progress.report(f"{name}: {message}")


def _skipped(progress: Progress, name: str, message: str) -> None:
    progress.step(name, Outcome.SKIPPED, message)
    progress.report(f"{name}: {message}")
