"""Store fixtures: real redis-server processes on free loopback ports, never the machine's shared Redis.

`redis_url` is $ORCHESTRA_TEST_REDIS_URL when set, else one redis-server per session. `cluster_url` is a
3-master Redis Cluster started once per session. Every test uses fresh uuid game ids, so nothing is ever
flushed. `store` runs each contract test against every adapter: memory, redis and cluster.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

# The project root goes ahead of tests/ on sys.path, so `domain` is the package, not tests/domain.
ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)

import pytest  # noqa: E402
import redis  # noqa: E402
from store_helpers import RedisProcess, bounded  # noqa: E402

from server.memory_store import MemoryEventStore  # noqa: E402
from server.redis_store import RedisEventStore  # noqa: E402
from server.store import EventStore  # noqa: E402

CLUSTER_NODES = 3
SLOTS = 16384


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
    """A redis-server for one test alone, which the test may stop, freeze and restart."""
    server = RedisProcess(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real 3-master Redis Cluster on loopback ports; the URL of its first node."""
    root = tmp_path_factory.mktemp("cluster")
    nodes = [
        RedisProcess(root / f"node{i}", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
        for i in range(CLUSTER_NODES)
    ]
    try:
        for node in nodes:
            node.start()
        _join(nodes)
        yield nodes[0].url
    finally:
        for node in nodes:
            node.stop()


def _join(nodes: list[RedisProcess]) -> None:
    clients = [redis.Redis(port=node.port, socket_timeout=5) for node in nodes]
    try:
        for client in clients[1:]:
            client.execute_command("CLUSTER MEET", "127.0.0.1", nodes[0].port)
        share = SLOTS // len(nodes)
        for i, client in enumerate(clients):
            last = SLOTS - 1 if i == len(nodes) - 1 else (i + 1) * share - 1
            client.execute_command("CLUSTER ADDSLOTSRANGE", i * share, last)
        deadline = time.monotonic() + 30
        while not all(_cluster_ok(client) for client in clients):
            assert time.monotonic() < deadline, "the test cluster never reached cluster_state:ok"
            time.sleep(0.05)
    finally:
        for client in clients:
            client.close()


def _cluster_ok(client: redis.Redis) -> bool:
    info = client.execute_command("CLUSTER INFO")
    if not isinstance(info, dict):
        text = info.decode() if isinstance(info, bytes) else str(info)
        info = dict(line.split(":", 1) for line in text.split() if ":" in line)
    fields = {str(key): str(value) for key, value in info.items()}
    return fields.get("cluster_state") == "ok" and fields.get("cluster_known_nodes") == str(CLUSTER_NODES)


@pytest.fixture(
    params=[
        pytest.param("memory"),
        pytest.param("redis", marks=pytest.mark.integration),
        pytest.param("cluster", marks=pytest.mark.integration),
    ]
)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    """Each adapter of the port in turn; Redis ones on this session's servers."""
    adapter: EventStore
    if request.param == "memory":
        adapter = MemoryEventStore()
    else:
        url = request.getfixturevalue("redis_url" if request.param == "redis" else "cluster_url")
        adapter = await bounded(RedisEventStore.from_url(url, cluster=request.param == "cluster"))
    try:
        yield adapter
    finally:
        await bounded(adapter.close())
