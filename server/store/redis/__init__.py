"""The event store on Redis Streams (standalone Redis 6.2+ / Valkey, or Redis Cluster).

Public: `RedisEventStore`; the key layout (`server.store.redis.keys`), for what reads or writes Redis
beside the store; the store's own pipelined connections (`server.store.redis.line`); the sizes of its
reads (`READ_CHUNK`, and `LINE_READ` for those over a line); and `APPEND_SCRIPT`, the one Lua script
every append runs (the benchmarks' bare-Redis baselines run it too). The other modules (`_adapter`,
`_scripts`, `_notify`) are the adapter's own.
"""

from server.store.redis._adapter import LINE_READ, READ_CHUNK, RedisEventStore
from server.store.redis._scripts import APPEND_MANY as APPEND_SCRIPT

__all__ = ["APPEND_SCRIPT", "LINE_READ", "READ_CHUNK", "RedisEventStore"]
