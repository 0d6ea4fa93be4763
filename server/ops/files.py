"""Reading an operator's NDJSON files (exports, archives) without trusting what lies at their path.

A folder handed to `orchestra import` or `verify --file` may hold anything named `*.ndjson`: a FIFO (whose
plain open waits for a writer for ever), a device or a link to one (`/dev/zero` never ends), a file far
larger than any game. Each is opened without blocking, read only when it is a regular file, and at most
`MAX_FILE_BYTES` of it, so a bad file costs its own item, never the run.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# Far above any game's archive (a game of the default 1,000 placements is well under a megabyte).
MAX_FILE_BYTES = 64 * 1024 * 1024
_CHUNK = 1024 * 1024


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: nothing to read."""


class FileTooLarge(OSError):
    """The file holds more than the bound."""


class LinkRefused(OSError):
    """The path is a symbolic link where none is followed."""


def kind_of(mode: int) -> str:
    """What a file mode says the file is, in words."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: Path, limit: int = MAX_FILE_BYTES, *, follow: bool = True) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; with `follow=False` a symbolic
    link is refused. Raises: FileNotFoundError, NotRegularFile, FileTooLarge, LinkRefused, OSError."""
    if follow:  # told apart before any open: opening a device may itself do something
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{kind_of(mode)}, not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO put there since the stat opens without waiting
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise LinkRefused("a symbolic link (not followed here)") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(f"{kind_of(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise FileTooLarge(f"{info.st_size} bytes, over the bound of {limit}")
        chunks: list[bytes] = []
        total = 0
        # Bounded as it is read, not only by its stated size: a file may grow, and some report size 0.
        while chunk := os.read(fd, min(_CHUNK, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise FileTooLarge(f"over the bound of {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_lines(path: Path, limit: int = MAX_FILE_BYTES) -> list[bytes]:
    """The non-blank lines of an NDJSON file (read as `read_bounded` reads it)."""
    return [line for line in read_bounded(path, limit).splitlines() if line.strip()]
