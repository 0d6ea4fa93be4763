"""Commands packed into RESP by hiredis (C) instead of redis-py's asyncio packer (Python).

redis-py's asyncio connections pack every argument in a Python loop, even with hiredis installed (only its
synchronous client uses hiredis for this). It matters for a script call of many arguments: the
benchmarks' redis-py baselines (bench/peer.py's scripted rounds, bench/minimal.py's appends) pack with
hiredis, as the store's own append line does. The store's redis-py client does not: its reads and creates
are a few arguments each, and packed in Python they cost about the same.

Only the benchmarks use it, so it lives here and the wheel does not carry it. It overrides a connection
class's `pack_command`, which redis-py calls for every command: `missing()` says when an installed redis-py
or hiredis no longer has what this relies on (tests/bench/test_hiredis_packing.py).
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection, Connection
from redis.typing import EncodableT

from server.compat import installed


class HiredisPacking:
    """Mixed into a redis-py asyncio connection class: the same bytes, packed by hiredis."""

    def pack_command(self, *args: EncodableT) -> list[bytes]:
        # Like redis-py, split a command name such as "SCRIPT LOAD" into its words.
        if isinstance(args[0], str):
            args = (*args[0].encode().split(), *args[1:])
        elif isinstance(args[0], bytes) and b" " in args[0]:
            args = (*args[0].split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]  # type: ignore[arg-type]
        except TypeError:  # a type hiredis does not take: redis-py's own packer explains it
            packed: list[bytes] = super().pack_command(*args)  # type: ignore[misc]
            return packed


def with_hiredis_packing(cls: type[AbstractConnection]) -> type[AbstractConnection]:
    """`cls` (TCP, TLS or Unix socket connection) with its commands packed by hiredis."""
    if issubclass(cls, HiredisPacking):
        return cls
    packed: type[Any] = type(f"Hiredis{cls.__name__}", (HiredisPacking, cls), {})
    return packed


def use_hiredis_packing(client: Redis) -> Redis:
    """`client`, whose pool makes its connections (of the class its URL's scheme chose) pack with hiredis.

    Call it before the client's first command: connections already made keep redis-py's packer.
    """
    pool = client.connection_pool
    pool.connection_class = with_hiredis_packing(pool.connection_class)
    return client


def missing() -> list[str]:
    """What this module relies on that the installed redis-py or hiredis lacks, each naming the version."""
    found = []
    if not callable(getattr(AbstractConnection, "pack_command", None)):
        found.append(f"redis {installed('redis')}: asyncio connections have no pack_command to override")
    if not callable(getattr(hiredis, "pack_command", None)):
        found.append(f"hiredis {installed('hiredis')} has no pack_command")
    pool_class = getattr(ConnectionPool.from_url("redis://127.0.0.1:1/0"), "connection_class", None)
    if not (isinstance(pool_class, type) and issubclass(pool_class, Connection)):
        found.append(
            f"redis {installed('redis')}: a pool has no connection_class to replace ({pool_class!r})"
        )
    return found
