"""The projector's process: take the lease, pass after pass while it holds, give it up on the way out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from server.records.database import RecordsDatabase, SqlRecords
from server.records.lease import Lease
from server.records.projector import Projector, Streams
from server.records.status import Status
from server.store import StoreUnavailable
from server.store.redis.sentinel import is_sentinel_url, parse_sentinel_url, sentinel_client

# How long the lease's client waits to connect (a Sentinel's answer included).
CONNECT_TIMEOUT = 5.0

# The lease a rebuild holds: one rebuild at a time, beside the projector's own lease.
REBUILD_KEY = "orchestra:records:rebuild"


async def run(
    streams: Callable[[], AbstractAsyncContextManager[Streams]],
    redis_url: Callable[[], str],
    database: RecordsDatabase,
    *,
    archives: Path | None = None,
    interval: float = 1.0,
    ttl: float = 10.0,
    once: bool = False,
    port: int | None = None,
    say: Callable[[str], None] = print,
) -> int:
    """Project while the lease is ours (`once`: one pass once caught up); 0 when done, never otherwise.

    `streams` lends the store for one pass (an operator command's store may change hands between passes);
    `redis_url` names the Redis holding the lease; `port`: serve the status there (0: a free port).
    """
    client = await _lease_client(redis_url())
    lease = Lease(client, ttl=ttl)
    projector = Projector(database, archives)
    status = (
        Status(lambda: projector.lag, port=port or 0, damaged=lambda: len(projector.damaged))
        if port is not None
        else None
    )
    if status is not None:
        say(f"records: status on http://127.0.0.1:{await status.start()}")
    try:
        waiting = False
        while not await lease.take():
            if not waiting:
                say("records: another projector holds the lease; waiting")
                waiting = True
            await asyncio.sleep(ttl / 3)
        say("records: projecting")
        told = 0
        unreachable = False
        while True:
            try:
                async with streams() as store:
                    await projector.catch_up(store)
            except StoreUnavailable as exc:  # an outage, a failover: the next pass tries again
                projector.lag = msgspec.structs.replace(projector.lag, caught_up=False)
                if not unreachable:
                    say(f"records: the store cannot be reached ({exc}); trying again")
                unreachable = True
                await asyncio.sleep(interval)
                if not await _hold(lease, ttl, say):
                    say("records: the lease was lost; stopping")
                    return 1
                continue
            if unreachable:
                say("records: the store answers again")
                unreachable = False
            found = list(projector.damaged.values())
            for damage in found[told:]:  # each damaged game once
                say(
                    f"records: game {damage.game_id} cannot be folded at version {damage.version} "
                    f"({damage.why}); it is left out of the records until it is restored "
                    "(orchestra verify says more)"
                )
            told = len(found)
            if once and projector.lag.caught_up:
                return 0
            await asyncio.sleep(interval)
            if not await _hold(lease, ttl, say):
                say("records: the lease was lost; stopping")
                return 1
    finally:
        if status is not None:
            await status.stop()
        await lease.release()
        await client.aclose()


async def rebuild(
    streams: Callable[[], AbstractAsyncContextManager[Streams]],
    redis_url: Callable[[], str],
    open_version: Callable[[int | None], SqlRecords],
    *,
    archives: Path | None = None,
    ttl: float = 10.0,
    say: Callable[[str], None] = print,
) -> int:
    """Build the next version of the tables beside the one reads use, from the streams and the archives;
    switch reads to it once caught up. The projector following the old version goes on meanwhile, and
    moves to the new one at its next pass; the version before the old one is dropped first."""
    client = await _lease_client(redis_url())
    lease = Lease(client, ttl=ttl, key=REBUILD_KEY)
    live = open_version(None)
    try:
        if not await lease.take():
            say("records: another rebuild is running")
            return 1
        old = live.version
        for version in (old - 1, old + 1):  # the version before the live one; what a rebuild left
            if version >= 1:
                gone = open_version(version)
                gone.drop()
                gone.close()
        building = open_version(old + 1)
        projector = Projector(building, archives)
        say(f"records: rebuilding version {old + 1} beside version {old}")
        while True:
            async with streams() as store:
                await projector.catch_up(store)
            if projector.lag.caught_up:
                break
            if not await lease.renew():
                say("records: the rebuild's lease was lost; stopping")
                return 1
        building.switch()
        building.close()
        say(f"records: reads switched to version {old + 1}")
        return 0
    finally:
        live.close()
        await lease.release()
        await client.aclose()


async def _hold(lease: Lease, ttl: float, say: Callable[[str], None]) -> bool:
    """Whether the lease is still ours: renewed, or taken again when it is free (a failover to a replica
    that had not yet received it loses it). While its Redis cannot be reached, wait: the lease runs out
    meanwhile if the wait is long, and then another projector may take it, which this one then sees."""
    told = False
    while True:
        try:
            return await lease.take()
        except (RedisError, OSError) as exc:
            if not told:
                say(f"records: the lease's Redis cannot be reached ({exc}); trying again")
                told = True
            await asyncio.sleep(min(1.0, ttl / 3))


async def _lease_client(url: str) -> Any:
    """A client of the Redis at `url` for the lease: a Cluster client when that Redis is a Cluster node,
    and the primary the Sentinels name (followed through failovers) for a redis+sentinel:// URL."""
    if is_sentinel_url(url):
        return sentinel_client(parse_sentinel_url(url), CONNECT_TIMEOUT, max_connections=4)
    client = aioredis.from_url(url)
    try:
        cluster = int((await client.info("cluster")).get("cluster_enabled", 0)) == 1
    except BaseException:
        await client.aclose()
        raise
    if not cluster:
        return client
    await client.aclose()
    return aioredis.RedisCluster.from_url(url)
