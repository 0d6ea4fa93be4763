"""Service fixtures: a real redis-server for the command service's tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if sys.path[:1] != [str(ROOT)]:
    sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests" / "store"))

from store_helpers import RedisProcess  # noqa: E402


@pytest.fixture(scope="session")
def service_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """$ORCHESTRA_TEST_REDIS_URL, else a redis-server of this session's own."""
    configured = os.environ.get("ORCHESTRA_TEST_REDIS_URL")
    if configured:
        yield configured
        return
    server = RedisProcess(tmp_path_factory.mktemp("service-redis")).start()
    try:
        yield server.url
    finally:
        server.stop()
