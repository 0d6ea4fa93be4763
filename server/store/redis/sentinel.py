"""A primary found through Redis Sentinel: the URL form, and redis-py's Sentinel-managed clients.

redis-py has Sentinel support but no URL for it, so the store reads one of its own:

    redis+sentinel://[[username]:password@]host1:26379[,host2:26379,...]/service_name[/db]

The password (and username) are the primary's; the Sentinels are asked without one. A client made here
asks the Sentinels for the primary's address whenever it connects, and takes only an address a majority
of the Sentinels named (one Sentinel not yet told of a failover, or cut off, names the old primary); it
then asks the Redis itself for its role and keeps the connection only if it is a primary. A connection
whose Redis answers as a replica would (READONLY to a write, as redis-py handles it, or the refusal of
WAIT) is dropped: after a failover every connection, the subscriber's included, is made again to the
promoted replica, and none goes on reading from a demoted primary.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, NamedTuple, cast
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, ResponseError, TimeoutError

SCHEME = "redis+sentinel"
DEFAULT_PORT = 26379


class SentinelUrlError(ValueError):
    """A redis+sentinel:// URL that names no Sentinel, no service, or a bad port or database."""


class SentinelAddress(NamedTuple):
    """Where the Sentinels are and which primary of theirs to use."""

    sentinels: list[tuple[str, int]]
    service: str
    db: int
    username: str | None
    password: str | None


def is_sentinel_url(url: str) -> bool:
    """Whether `url` names Sentinels (redis+sentinel://) rather than a Redis."""
    return url.startswith(f"{SCHEME}://")


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The Sentinels, service name, database and credentials of a redis+sentinel:// `url`.

    Raises: SentinelUrlError.
    """
    if not is_sentinel_url(url):
        raise SentinelUrlError(f"not a {SCHEME}:// URL")
    rest = url[len(SCHEME) + 3 :]
    # The host list holds commas, which urlsplit would take for one odd host: split it off first.
    userinfo, _, hostpath = rest.rpartition("@")
    hosts, _, path = hostpath.partition("/")
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels: list[tuple[str, int]] = []
    for host in hosts.split(","):
        try:
            parts = urlsplit(f"//{host}")
            port = parts.port or DEFAULT_PORT
        except ValueError as exc:
            raise SentinelUrlError(f"bad Sentinel address {host!r}: {exc}") from None
        if not parts.hostname:
            raise SentinelUrlError(f"a Sentinel address without a host in {SCHEME}:// URL")
        sentinels.append((parts.hostname, port))
    names = [unquote(part) for part in path.split("/") if part] if path else []
    if not names or len(names) > 2:
        raise SentinelUrlError(f"{SCHEME}:// URL wants /service_name[/db] after the Sentinels")
    db = 0
    if len(names) == 2:
        if not names[1].isdigit():
            raise SentinelUrlError(f"database {names[1]!r} is not a number")
        db = int(names[1])
    return SentinelAddress(sentinels, names[0], db, username, password)


# How a replica refuses the acknowledgement levels' waits (a write gets READONLY, which redis-py handles).
_REPLICA_REFUSALS = ("WAIT cannot be used with replica", "WAITAOF cannot be used with replica")


class QuorumSentinel(Sentinel):
    """Sentinels whose majority names the primary: each is asked, and an address counts only when more
    than half of all of them name it, each seeing it up and as a primary."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        """The primary's address a majority of the Sentinels name. Raises: MasterNotFoundError."""
        answers = await asyncio.gather(
            *(sentinel.sentinel_masters() for sentinel in self.sentinels), return_exceptions=True
        )
        named: Counter[tuple[str, int]] = Counter()
        for answer in answers:
            if isinstance(answer, ConnectionError | ResponseError | TimeoutError):
                continue
            if isinstance(answer, BaseException):
                raise answer
            state = cast(dict[str, Any], answer).get(service_name)
            if state and self.check_master_state(state, service_name):
                named[(state["ip"], int(state["port"]))] += 1
        if named:
            address, count = named.most_common(1)[0]
            if count * 2 > len(self.sentinels):
                return address
        raise MasterNotFoundError(
            f"no majority of the {len(self.sentinels)} Sentinels names a primary for {service_name!r} "
            f"(named: {dict(named) or 'none'})"
        )


class PrimaryConnection(SentinelManagedConnection):
    """A connection to the primary the Sentinels name, kept only while that Redis is one."""

    async def connect_to(self, address: tuple[str, int]) -> None:
        """Connect, then ask the Redis its role. Raises: ConnectionError (it is not a primary)."""
        await super().connect_to(address)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        await self.send_command("ROLE")
        role = await self.read_response()
        if not role or role[0] not in (b"master", "master"):
            await self.disconnect()
            raise ConnectionError(f"{address[0]}:{address[1]} is not a primary (the Sentinels' news is old)")

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        """A reply; a connection to a Redis that refuses WAIT as a replica does is dropped. Raises: what
        redis-py raises, and ConnectionError for a replica's refusal."""
        try:
            return await super().read_response(*args, **kwargs)
        except ResponseError as exc:
            if not str(exc).startswith(_REPLICA_REFUSALS):
                raise
            await self.disconnect()
            raise ConnectionError(f"the Redis is a replica now: {exc}") from exc


def sentinel_client(address: SentinelAddress, connect_timeout: float, max_connections: int) -> Redis:
    """A client of the primary the Sentinels name now, following it through failovers; with the store's
    one quick retry, and no socket timeout (the store bounds every call itself)."""
    options: dict[str, Any] = {
        "socket_timeout": None,
        "socket_connect_timeout": connect_timeout,
        "retry": Retry(ExponentialBackoff(cap=0.1, base=0.01), 1),
        "db": address.db,
        "max_connections": max_connections,
    }
    if address.password is not None:
        options["password"] = address.password
    if address.username is not None:
        options["username"] = address.username
    sentinel = QuorumSentinel(
        address.sentinels,
        sentinel_kwargs={"socket_timeout": connect_timeout, "socket_connect_timeout": connect_timeout},
    )
    client: Redis = sentinel.master_for(
        address.service, redis_class=Redis, connection_class=PrimaryConnection, **options
    )
    return client
