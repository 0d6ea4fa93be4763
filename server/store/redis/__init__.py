"""The event store on Redis Streams (standalone Redis 6.2+ / Valkey, or Redis Cluster).

Public: `RedisEventStore`; the key layout (`server.store.redis.keys`), for what reads or writes Redis
beside the store; the store's own pipelined connections (`server.store.redis.line`); the acknowledgement
levels (`ACK_LEVELS`) and the refusals of a level or a Sentinel URL (`AckLevelRefused`,
`SentinelUrlError`; `server.store.redis.sentinel`); the sizes of its
reads (`READ_CHUNK`, and `LINE_READ` for those over a line); and `APPEND_SCRIPT`, the one Lua script
every append runs (the benchmarks' bare-Redis baselines run it too). The other modules (`_adapter`,
`_scripts`, `_notify`) are the adapter's own.
"""

from server.store.redis._adapter import (
    ACK_LEVELS,
    ACK_TIMEOUT_MS,
    LINE_READ,
    READ_CHUNK,
    AckLevelRefused,
    RedisEventStore,
)
from server.store.redis._scripts import APPEND_MANY as APPEND_SCRIPT
from server.store.redis.sentinel import SentinelUrlError

__all__ = [
    "ACK_LEVELS",
    "ACK_TIMEOUT_MS",
    "APPEND_SCRIPT",
    "LINE_READ",
    "READ_CHUNK",
    "AckLevelRefused",
    "RedisEventStore",
    "SentinelUrlError",
]
