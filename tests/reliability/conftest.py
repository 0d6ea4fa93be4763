"""Reliability fixtures: server processes (`orchestra serve`) on redis-servers of the tests' own.

The e2e suite's ServerProcess and the store suite's RedisProcess are reused as they are; every Redis here
runs on a free loopback port in a temporary directory (never the shared 6379), with an append-only file,
so one can be stopped and restarted on the same port with its data.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
for helper_dir in (ROOT / "tests" / "store", ROOT / "tests" / "reliability"):
    if str(helper_dir) not in sys.path:
        sys.path.append(str(helper_dir))

from store_helpers import RedisProcess  # noqa: E402


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The e2e conftest under another name: only its ServerProcess class is used (its fixtures stay there).
ServerProcess: Any = _load("e2e_server_process", ROOT / "tests" / "e2e" / "conftest.py").ServerProcess

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
def start_server(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start `orchestra serve` processes: `start(redis_url, **settings)` (None: embedded Redis)."""
    started: list[Any] = []

    def start(redis_url: str | None, **settings: object) -> Any:
        server = ServerProcess(redis_url, tmp_path / f"node{len(started)}", **settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def module_server(module_redis: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One server for the tests of a module, on the module's Redis, with the default limits."""
    server = ServerProcess(module_redis.url, tmp_path_factory.mktemp("module-server"))
    try:
        yield server
    finally:
        server.stop()
