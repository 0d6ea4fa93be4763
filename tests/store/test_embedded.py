"""The embedded redis-server: durable (AOF, fsync always), exclusive per data dir, never orphaned."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from server.ops.embedded_redis import LOCK_NAME, DataDirLocked, EmbeddedRedis
from server.store.redis import RedisEventStore
from tests.support.appends import append
from tests.support.redis import bounded, new_id
from tests.support.waiting import until

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

PARENT_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from server.ops.embedded_redis import EmbeddedRedis

    async def main() -> None:
        embedded = EmbeddedRedis(Path(sys.argv[1]))
        await embedded.start()
        print(embedded.pid, flush=True)
        await asyncio.Event().wait()  # until killed

    asyncio.run(main())
    """
)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def embedded(data_dir: Path) -> AsyncIterator[EmbeddedRedis]:
    server = EmbeddedRedis(data_dir)
    await bounded(server.start(), 15)
    try:
        yield server
    finally:
        await bounded(server.stop(), 15)


async def store_on(url: str) -> RedisEventStore:
    return await bounded(RedisEventStore.from_url(url))


async def test_it_runs_on_a_unix_socket_with_appendonly_fsync_always_and_bounded_memory(
    embedded: EmbeddedRedis, data_dir: Path
) -> None:
    assert embedded.socket == data_dir.resolve() / "redis.sock"
    assert embedded.url.startswith("unix://:") and embedded.url.endswith(f"@{data_dir.resolve()}/redis.sock")
    store = await store_on(embedded.url)
    try:
        config = await bounded(store.client.config_get("*"))
        assert (config["appendonly"], config["appendfsync"], config["save"]) == ("yes", "always", "")
        assert config["dir"] == str(data_dir.resolve())
        assert (config["port"], config["maxmemory-policy"]) == ("0", "noeviction")
        assert config["maxmemory"] == str(1024**3)  # the default, 1gb
    finally:
        await bounded(store.close())


async def test_acknowledged_events_survive_a_kill_9_of_redis(data_dir: Path) -> None:
    first = EmbeddedRedis(data_dir)
    store = await store_on(await bounded(first.start(), 15))
    games = [new_id() for _ in range(5)]
    for game_id in games:
        await bounded(store.create(game_id, b"1", {"seat:0": "h"}))
        for version in range(2, 21):
            await bounded(append(store, game_id, version - 1, [str(version).encode()], f"c{version}"))
    await bounded(store.close())
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    await bounded(first.stop(), 15)

    second = EmbeddedRedis(data_dir)
    store = await store_on(await bounded(second.start(), 15))
    try:
        assert await bounded(store.games()) == games
        for game_id in games:
            assert [r.version for r in await bounded(store.read(game_id))] == list(range(1, 21))
            assert await bounded(store.credentials(game_id)) == {"seat:0": "h"}
    finally:
        await bounded(store.close())
        await bounded(second.stop(), 15)


@pytest.mark.logs_warnings
async def test_the_supervisor_restarts_a_redis_that_died(embedded: EmbeddedRedis) -> None:
    store = await store_on(embedded.url)
    try:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        dead = embedded.pid
        assert dead is not None
        os.kill(dead, signal.SIGKILL)
        await until(lambda: embedded.pid not in (dead, None), 10, "a new redis-server")
        # The new process is known before it answers: until then a call is refused (unavailable).
        await until(store.ping, 10, "the new redis-server answering")
        assert await bounded(store.version(game_id)) == 1
    finally:
        await bounded(store.close())


async def test_a_second_server_on_the_same_data_dir_is_refused(
    embedded: EmbeddedRedis, data_dir: Path
) -> None:
    with pytest.raises(DataDirLocked, match=str(data_dir.resolve())):
        await bounded(EmbeddedRedis(data_dir).start(), 15)
    assert await bounded(embedded_ping(embedded))


async def embedded_ping(embedded: EmbeddedRedis) -> bool:
    store = await store_on(embedded.url)
    try:
        return await store.ping()
    finally:
        await store.close()


async def test_a_data_dir_too_long_for_a_unix_socket_gets_its_socket_in_a_private_directory(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedRedis(deep)
    url = await bounded(server.start(), 15)
    try:
        assert server.socket is not None and not server.socket.is_relative_to(deep)
        assert url.startswith("unix://:") and url.endswith(f"@{server.socket}")
        assert await bounded(embedded_ping(server))
    finally:
        await bounded(server.stop(), 15)
    assert not server.socket.parent.exists()  # removed at stop


def test_redis_dies_with_its_parent_and_does_not_keep_the_lock(data_dir: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT, str(data_dir)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.ppid() == parent.pid
        assert not [f for f in child.open_files() if f.path.endswith(LOCK_NAME)]
        parent.kill()
        parent.wait(5)
        child.wait(5)  # psutil.TimeoutExpired fails the test if the orphan survives
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(5)
        if parent.stdout is not None:
            parent.stdout.close()
    asyncio.run(start_and_stop(data_dir))


async def start_and_stop(data_dir: Path) -> None:
    server = EmbeddedRedis(data_dir)
    await bounded(server.start(), 15)
    await bounded(server.stop(), 15)
