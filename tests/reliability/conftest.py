"""Reliability fixtures: server processes (`orchestra serve`) on redis-servers of the tests' own.

`support.servers.ServerProcess` and `support.redis.RedisProcess` are used as they are; every Redis here
runs on a free loopback port in a temporary directory (never the shared 6379), with an append-only file,
so one can be stopped and restarted on the same port with its data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.redis import RedisProcess
from tests.support.servers import ServerProcess

DURABLE = ("--appendonly", "yes", "--appendfsync", "always")


@pytest.fixture
def redis_process(tmp_path: Path) -> Iterator[RedisProcess]:
    """A durable redis-server of this test alone (restartable on the same port with its data)."""
    process = RedisProcess(tmp_path / "redis", *DURABLE).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """A redis-server shared by the tests of one module."""
    process = RedisProcess(tmp_path_factory.mktemp("module-redis"), *DURABLE).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def start_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., ServerProcess]]:
    """Start `orchestra serve` processes: `start(redis_url, **settings)` (None: embedded Redis).

    Overrides tests/conftest.py's `start_server`: here the Redis is always named, never the session's.
    """
    if "redis_process" in request.fixturenames:
        # Set up first, so that it stops after the servers, whatever the order a test names them in: a
        # Redis gone under a server still running makes it log store errors that no test asked for.
        request.getfixturevalue("redis_process")
    started: list[ServerProcess] = []

    def start(redis_url: str | None, **settings: Any) -> ServerProcess:
        server = ServerProcess(redis_url, tmp_path / f"node{len(started)}", **settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def module_server(
    module_redis: RedisProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One server for the tests of a module, on the module's Redis, with the default limits."""
    server = ServerProcess(module_redis.url, tmp_path_factory.mktemp("module-server"))
    try:
        yield server
    finally:
        server.stop()
