"""Store fixtures: real redis-server processes on free loopback ports, never the machine's shared Redis.

`redis_url` here is database 1 of the session's Redis (tests/conftest.py: $ORCHESTRA_TEST_REDIS_URL, else
one redis-server per session). `cluster_url` is a 3-master Redis Cluster started once per session. Every
test uses fresh uuid game ids, so nothing is ever flushed. `store` runs each contract test against every
adapter: memory, redis and cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from server.store import EventStore
from server.store.memory import MemoryEventStore
from server.store.redis import RedisEventStore
from tests.support.redis import bounded, start_cluster

STORE_DATABASE = 1


@pytest.fixture(scope="session")
def redis_url(redis_url: str) -> str:
    """The session Redis, database 1: the contract tests' raw streams stay out of database 0, whose game
    list the servers of the e2e and browser tests read (it would not decode them)."""
    parts = urlsplit(redis_url)
    if parts.scheme == "unix":
        query = [(key, value) for key, value in parse_qsl(parts.query) if key != "db"]
        return urlunsplit(parts._replace(query=urlencode([*query, ("db", str(STORE_DATABASE))])))
    return urlunsplit(parts._replace(path=f"/{STORE_DATABASE}"))


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real 3-master Redis Cluster on loopback ports; the URL of its first node."""
    nodes, url = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield url
    finally:
        for node in nodes:
            node.stop()


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
