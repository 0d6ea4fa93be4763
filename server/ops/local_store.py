"""The event store an operator command works on: a Redis by URL, or the embedded one of a data dir.

With a data dir, the command uses the running server's Redis (through the 0600 `redis.url` it writes
there), or, when no server runs on that data dir, starts the embedded Redis on it for the command's
duration. So `orchestra archive` and `orchestra import` work with the server running or stopped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from server.ops.embedded_redis import URL_NAME, DataDirLocked, EmbeddedRedis
from server.store.redis import RedisEventStore


class LocalStoreError(Exception):
    """The store cannot be opened (said why)."""


@asynccontextmanager
async def opened(redis_url: str | None, data_dir: Path) -> AsyncIterator[RedisEventStore]:
    """The store at `redis_url`, else the embedded Redis of `data_dir`; closed (and stopped) on exit.

    Raises: LocalStoreError, StoreUnavailable, EmbeddedRedisError.
    """
    embedded: EmbeddedRedis | None = None
    url = redis_url
    if url is None:
        embedded = EmbeddedRedis(data_dir)
        try:
            url = await embedded.start()
        except DataDirLocked:  # the server runs on this data dir: use its Redis
            embedded = None
            try:  # 0600: readable by the server's user only
                url = (data_dir / URL_NAME).read_text().strip()
            except OSError as exc:
                raise LocalStoreError(f"cannot read the running server's {URL_NAME}: {exc}") from None
    try:
        store = await RedisEventStore.from_url(url)
        try:
            yield store
        finally:
            await store.close()
    finally:
        if embedded is not None:
            await embedded.stop()
