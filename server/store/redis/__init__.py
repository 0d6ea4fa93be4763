"""The event store on Redis Streams (standalone Redis 6.2+ / Valkey, or Redis Cluster).

`RedisEventStore` is the one public name: its modules (`_adapter`, `_scripts`, `_line`, `_notify`) are the
adapter's own.
"""

from server.store.redis._adapter import RedisEventStore

__all__ = ["RedisEventStore"]
