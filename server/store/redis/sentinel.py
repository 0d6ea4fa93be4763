"""A primary found through Redis Sentinel: the URL form, and redis-py's Sentinel-managed clients.

redis-py has Sentinel support but no URL for it, so the store reads one of its own:

    redis+sentinel://[[username]:password@]host1:26379[,host2:26379,...]/service_name[/db]

The password (and username) are the primary's; the Sentinels are asked without one. A client made here
asks the Sentinels for the primary's address whenever it connects, and redis-py drops a connection whose
Redis answers READONLY (a demoted primary): after a failover every connection, the subscriber's included,
is made again to the promoted replica.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff

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
    sentinel = Sentinel(
        address.sentinels,
        sentinel_kwargs={"socket_timeout": connect_timeout, "socket_connect_timeout": connect_timeout},
    )
    client: Redis = sentinel.master_for(address.service, redis_class=Redis, **options)
    return client
