"""End-to-end fixtures: real server processes (uvicorn on a free port) against a real redis-server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if sys.path[:1] != [str(ROOT)]:
    sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests" / "store"))

from store_helpers import RedisProcess  # noqa: E402


class ServerProcess:
    """`orchestra serve` in a child process; its JSON log lines are kept in a file."""

    def __init__(self, redis_url: str | None, directory: Path, port: int = 0, **settings: object) -> None:
        self.directory = directory
        self.log_path = directory / "server.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
        env.update({f"ORCHESTRA_{k.upper()}": str(v) for k, v in settings.items()})
        if redis_url is not None:
            env["ORCHESTRA_REDIS_URL"] = redis_url
        env.setdefault("ORCHESTRA_DATA_DIR", str(directory / "var"))
        directory.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
        )
        self.url = self._wait_for_url()

    def _wait_for_url(self, timeout: float = 30.0) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline().decode()
            if "running at" in line:
                return line.rsplit(" ", 1)[1].strip().rstrip("/")
            if not line and self.process.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"the server did not start: {self.log_path.read_text()[-2000:]}")

    def logs(self) -> str:
        """Everything the server logged so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def terminate(self) -> int:
        """SIGTERM, as an orchestrator would; returns the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(15)

    def kill(self) -> None:
        """SIGKILL: no shutdown at all."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


@pytest.fixture(scope="session")
def e2e_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Redis the e2e servers share: $ORCHESTRA_TEST_REDIS_URL, else one of this session's own."""
    configured = os.environ.get("ORCHESTRA_TEST_REDIS_URL")
    if configured:
        yield configured
        return
    server = RedisProcess(tmp_path_factory.mktemp("e2e-redis")).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def start_server(e2e_redis: str, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start `orchestra serve` processes (settings as keyword arguments); all are stopped afterwards."""
    started: list[ServerProcess] = []

    def start(redis_url: str | None = e2e_redis, port: int = 0, **settings: object) -> ServerProcess:
        server = ServerProcess(redis_url, tmp_path / f"node{len(started)}", port, **settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def start_module_server(
    e2e_redis: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ServerProcess]]:
    """Like `start_server`, but the servers live as long as the test module (one start for many tests)."""
    started: list[ServerProcess] = []
    base = tmp_path_factory.mktemp("module-servers")

    def start(redis_url: str | None = e2e_redis, port: int = 0, **settings: object) -> ServerProcess:
        server = ServerProcess(redis_url, base / f"node{len(started)}", port, **settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    """One server with the default settings."""
    return start_server()
