"""The projector's process: take the lease, pass after pass while it holds, give it up on the way out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import redis.asyncio as aioredis

from server.records.database import RecordsDatabase
from server.records.lease import Lease
from server.records.projector import Projector, Streams
from server.records.status import Status


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
    client = aioredis.from_url(redis_url())
    lease = Lease(client, ttl=ttl)
    projector = Projector(database, archives)
    status = Status(lambda: projector.lag, port=port or 0) if port is not None else None
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
        while True:
            async with streams() as store:
                await projector.catch_up(store)
            if once and projector.lag.caught_up:
                return 0
            await asyncio.sleep(interval)
            if not await lease.renew():
                say("records: the lease was lost; stopping")
                return 1
    finally:
        if status is not None:
            await status.stop()
        await lease.release()
        await client.aclose()
