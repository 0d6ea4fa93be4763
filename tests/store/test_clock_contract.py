"""The clock part of the store port, one contract for every adapter (memory, Redis, Redis Cluster)."""

from __future__ import annotations

import time

from server.store import StoreClock
from tests.support.redis import bounded


async def test_the_stores_clock_is_the_wall_clock_of_the_epoch(store: StoreClock) -> None:
    # What presence dates its fields by (Redis's TIME, the same for every node of a Cluster).
    assert abs(await bounded(store.time()) - time.time()) < 5
