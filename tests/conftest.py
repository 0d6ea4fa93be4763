"""Shared test settings. Under CI (CI=true), a skipped test is a failure: CI must prove everything.

Shared fixtures: `redis_url`, the session's Redis ($ORCHESTRA_TEST_REDIS_URL, else a redis-server of the
session's own on a free loopback port, never the machine's shared 6379), `own_redis` (one of a test
alone), and real `orchestra serve` processes on it: `start_server`, `start_module_server` and `server`.
Every test ends with a clean-log check (`_clean_logs`): a warning or error logged by a server it ran, in
process or as a child, fails it, unless it is marked `logs_warnings` (tests/support/logs.py).
Helpers live in tests/support (`tests.support.redis`, `tests.support.servers`, ...). tests/ is a package,
so that its modules have names of their own (tests.domain is not domain) and mypy checks them.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import logs
from tests.support.redis import RedisProcess
from tests.support.servers import STARTED, ServerProcess

STRICT = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{logs.MARKER}: the test provokes warnings or errors in a server's log on purpose"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if STRICT and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where every test must run: {report.longrepr}"


@pytest.fixture(scope="module", autouse=True)
def _collect_at_module_end() -> Iterator[None]:
    """Collect reference cycles as each test file ends: a socket a file leaves unclosed then fails that
    file (a ResourceWarning is an error), not whichever later test the collector happens to run in."""
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def _clean_logs(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test in which a server it ran logged a warning or an error: records of the servers run in
        this process, and the lines a child server wrote to its log file during the test once it served (its
    stop included)."""
    read = {id(server): len(server.logs()) for server in STARTED}
    yield
    found = logs.warning_records([*caplog.get_records("setup"), *caplog.get_records("call")])
    for server in list(STARTED):
        text = server.logs()
        found += logs.warning_lines(text[read.get(id(server), server.serving_from) :])
        if server.process.poll() is not None:
            STARTED.remove(server)  # stopped: nothing more to read
    if found and request.node.get_closest_marker(logs.MARKER) is None:
        shown = "\n".join(line[:500] for line in found[:20])
        pytest.fail(f"logged at warning or above (mark the test {logs.MARKER} if it means to):\n{shown}")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The test Redis: $ORCHESTRA_TEST_REDIS_URL, else a redis-server of this session's own."""
    configured = os.environ.get("ORCHESTRA_TEST_REDIS_URL")
    if configured:
        yield configured
        return
    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server of one test alone: its counts and games start empty, and the test may write to it,
    stop, freeze and restart it."""
    server = RedisProcess(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def start_server(
    redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ServerProcess]]:
    """Start `orchestra serve` processes (settings as keyword arguments); all are stopped afterwards."""
    if "own_redis" in request.fixturenames:
        # Set up first, so that it stops after the servers, whatever the order a test names them in: a
        # Redis gone under a server still running makes it log store errors that no test asked for.
        request.getfixturevalue("own_redis")
    started: list[ServerProcess] = []
    session_url = redis_url

    def start(redis_url: str | None = session_url, port: int = 0, **settings: object) -> ServerProcess:
        server = ServerProcess(redis_url, tmp_path / f"node{len(started)}", port, **settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def start_module_server(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ServerProcess]]:
    """Like `start_server`, but the servers live as long as the test module (one start for many tests)."""
    started: list[ServerProcess] = []
    base = tmp_path_factory.mktemp("module-servers")
    session_url = redis_url

    def start(redis_url: str | None = session_url, port: int = 0, **settings: object) -> ServerProcess:
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
