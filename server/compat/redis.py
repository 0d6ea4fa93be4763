"""Commands packed into RESP by hiredis (C) instead of redis-py's asyncio packer (Python).

redis-py's asyncio connections pack every argument in a Python loop, even with hiredis installed (only its
synchronous client uses hiredis for this). A group-commit round of 20 appends is one script call of some
140 arguments: packed in Python it cost about 8x what hiredis takes, on the path of every round.
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.typing import EncodableT


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
