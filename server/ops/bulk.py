"""Archive, import and verify many games at once, with progress, a summary and an exit status.

Each game is handled alone, exactly as the one-game command handles it, so a failure costs that game
only and the run goes on. Ctrl-C once lets the game at hand finish and stops (exit 130); twice stops at
once, and the game at hand is left as an interrupted one-game command leaves it. Either way the same
command again resumes without losing or doubling a game:

- archive: the games still in the store are the ones left to do. A game fenced by the stopped run is
  archived like any other; one whose verified file is in the folder already (the run stopped between the
  file and the delete) is only deleted. A file is renamed into the folder only once verified, so the
  folder never holds a partial one (`.<id>.ndjson.part` files are leftovers of a stopped write).
- import: a game the store holds already with exactly the file's envelopes was imported by the stopped
  run: it is skipped (and indexed, should the run have stopped before its index entry).
- verify: reads only; run it again.

Exit status: 0 when every item succeeded (or was skipped), 1 when any failed, 130 when interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from domain import GameEnded
from server.engine import envelope
from server.engine.signing import Keyring, Signer
from server.ops.archive import ArchiveError, archive
from server.ops.progress import Outcome, Progress
from server.ops.restore import RestoreError, Result, restore
from server.ops.verify import verify
from server.store import EventStore, StoreError

# Games whose newest envelope is read at once when listing the ended ones.
LIST_BATCH = 64
# What a game id must look like to name a file (the server's ids are URL-safe base64).
_FILE_SAFE = re.compile(r"[A-Za-z0-9_-]{1,128}")


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


def read_lines(path: Path) -> list[bytes]:
    """The non-blank lines of an NDJSON file. Raises: OSError."""
    return [line for line in path.read_bytes().splitlines() if line.strip()]


async def ended_games(store: EventStore, before: datetime | None = None) -> list[str]:
    """The games whose newest envelope is their signed end, oldest first; with `before`, only those that
    ended before it. Raises: StoreUnavailable."""
    ids = await store.games()
    found: list[str] = []
    for start in range(0, len(ids), LIST_BATCH):
        batch = ids[start : start + LIST_BATCH]
        ends = await asyncio.gather(*(_ended_at(store, game_id) for game_id in batch))
        found += [
            game_id
            for game_id, at in zip(batch, ends, strict=True)
            if at is not None and (before is None or at < before)
        ]
    return found


async def _ended_at(store: EventStore, game_id: str) -> datetime | None:
    version = await store.version(game_id)
    newest = await store.read(game_id, version - 1) if version else []
    if not newest:
        return None
    try:
        item = envelope.decode(newest[-1].data)
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
        self._progress.note(f"Ctrl-C: stopping after the current {self._item} (again to stop at once)")

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
    store: EventStore,
    out_dir: Path,
    progress: Progress,
    *,
    keys: Keyring,
    signer: Signer | None,
    before: datetime | None = None,
    allow_unsigned: bool = False,
    failpoint: str | None = None,
) -> int:
    """Archive every ended game (that ended before `before`) into `out_dir`/<id>.ndjson; the exit status.

    Raises: StoreUnavailable (listing the games).
    """
    interrupt = _Interrupt(progress, "game")
    with interrupt.installed():
        candidates = await ended_games(store, before)
        progress.begin(len(candidates))
        for game_id in candidates:
            if interrupt.requested:
                break
            if not _FILE_SAFE.fullmatch(game_id):
                _failed(progress, game_id, "an id that cannot name a file; archive it alone with --out")
                continue
            try:
                done = await archive(
                    store,
                    game_id,
                    out_dir / f"{game_id}.ndjson",
                    keys=keys,
                    signer=signer,
                    allow_unsigned=allow_unsigned,
                    failpoint=failpoint,
                )
            except (ArchiveError, StoreError, OSError) as exc:
                _failed(progress, game_id, f"not archived: {exc}")
                continue
            except asyncio.CancelledError:
                interrupt.cancelled()
                break
            how = "archived (its verified file was in place)" if done.reused else "archived"
            progress.step(game_id, Outcome.DONE, f"{how}: {done.envelopes} envelopes, {done.bytes} bytes")
    progress.interrupted = progress.handled < progress.total
    return progress.finish()


async def import_all(
    store: EventStore,
    files: Sequence[Path],
    progress: Progress,
    *,
    keys: Keyring,
    allow_unsigned: bool = False,
    complete: bool = True,
    skip_existing: bool = False,
    max_live: int = 0,
) -> int:
    """Import the game of each file; the exit status."""
    interrupt = _Interrupt(progress, "file")
    with interrupt.installed():
        progress.begin(len(files))
        for path in files:
            if interrupt.requested:
                break
            name = str(path)
            try:
                lines = read_lines(path)
                done = (
                    await restore(
                        store,
                        lines,
                        keys=keys,
                        allow_unsigned=allow_unsigned,
                        complete=complete,
                        skip_existing=skip_existing,
                        max_live=max_live,
                    )
                    if lines
                    else None
                )
            except (RestoreError, StoreError, OSError) as exc:
                _failed(progress, name, str(exc))
                continue
            except asyncio.CancelledError:
                interrupt.cancelled()
                break
            if done is None:
                _failed(progress, name, "empty: no envelopes")
            elif done.result is Result.IMPORTED:
                seats = "its tokens work as before" if done.credentials else "no credentials in the file"
                progress.step(
                    name, Outcome.DONE, f"game {done.game_id} imported: {done.envelopes} envelopes, {seats}"
                )
            elif done.result is Result.PRESENT:
                progress.step(name, Outcome.SKIPPED, f"game {done.game_id} is in the store already, the same")
            else:
                progress.step(
                    name, Outcome.SKIPPED, f"game {done.game_id} exists, with another history: skipped"
                )
    progress.interrupted = progress.handled < progress.total
    return progress.finish()


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
            except OSError as exc:
                _failed(progress, name, f"cannot read: {exc}")
                continue
            report = verify(lines, keys=keys, allow_unsigned=allow_unsigned, complete=complete)
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
