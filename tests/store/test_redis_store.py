"""What only the Redis adapter promises: its key layout, and driver errors translated at the boundary."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import pytest
import redis.asyncio

from server.store import Record, StoreError, StoreUnavailable
from server.store.redis import LINE_READ, READ_CHUNK, RedisEventStore
from server.store.redis.keys import appended_channel
from tests.support.appends import append
from tests.support.redis import RedisProcess, bounded, free_port, new_id
from tests.support.waiting import until

pytestmark = pytest.mark.integration


@pytest.fixture
async def redis_store(redis_url: str) -> AsyncIterator[RedisEventStore]:
    store = await bounded(RedisEventStore.from_url(redis_url))
    try:
        yield store
    finally:
        await bounded(store.close())


@contextlib.asynccontextmanager
async def opened(url: str, timeout: float = 2.0, block_ms: int = 5_000) -> AsyncIterator[RedisEventStore]:
    store = await bounded(RedisEventStore.from_url(url, cluster=False, timeout=timeout, block_ms=block_ms))
    try:
        yield store
    finally:
        await bounded(store.close())


async def test_a_game_lives_under_its_hash_tagged_keys_with_ids_0_version(
    redis_store: RedisEventStore,
) -> None:
    game_id = new_id()
    await bounded(redis_store.create(game_id, b"first", {"seat:0": "h0"}))
    await bounded(append(redis_store, game_id, 1, [b"second", b"third"], "cmd-1"))
    raw = redis_store.client
    entries: object = await bounded(raw.xrange(f"orchestra:{{{game_id}}}:events"))
    # The store's clients leave stream replies as Redis sent them (one flat field list per entry).
    assert entries == [[b"0-1", [b"e", b"first"]], [b"0-2", [b"e", b"second"]], [b"0-3", [b"e", b"third"]]]
    assert await bounded(raw.hgetall(f"orchestra:{{{game_id}}}:auth")) == {b"seat:0": b"h0"}
    assert await bounded(raw.hgetall(f"orchestra:{{{game_id}}}:commands")) == {b"cmd-1": b"2 3"}
    assert await bounded(raw.zscore("orchestra:games", game_id)) is not None


async def test_an_entry_with_more_fields_than_the_envelope_still_reads_as_its_envelope(
    redis_store: RedisEventStore,
) -> None:
    game_id = new_id()
    await bounded(redis_store.create(game_id, b"first", {}))
    # Written by hand, as a tool might: the envelope's field is not the first.
    await bounded(
        redis_store.client.xadd(f"orchestra:{{{game_id}}}:events", {"note": "x", "e": "second"}, id="0-2")
    )
    records = await bounded(redis_store.read(game_id))
    assert [(r.version, r.data) for r in records] == [(1, b"first"), (2, b"second")]
    assert await bounded(redis_store.version(game_id)) == 2


async def test_the_version_comes_from_the_top_entry_id_never_from_xlen(redis_store: RedisEventStore) -> None:
    game_id = new_id()
    await bounded(redis_store.create(game_id, b"1", {}))
    await bounded(append(redis_store, game_id, 1, [b"2", b"3"], "c"))
    await bounded(redis_store.client.xdel(f"orchestra:{{{game_id}}}:events", "0-2"))
    assert await bounded(redis_store.version(game_id)) == 3
    assert (await bounded(append(redis_store, game_id, 3, [b"4"], "d"))).last == 4


async def test_a_read_of_any_window_holds_exactly_its_versions(redis_store: RedisEventStore) -> None:
    """Around the slices a read is cut into (its first over the reads line, the rest in chunks on a
    pooled connection): every window, against the plain list of what was appended."""
    game_id, total = new_id(), 2 * READ_CHUNK + LINE_READ + 3
    stored = [f"e{version}".encode() for version in range(1, total + 1)]
    await bounded(redis_store.create(game_id, stored[0], {}))
    for start in range(1, total, 500):
        await bounded(append(redis_store, game_id, start, stored[start : start + 500], f"c{start}"))
    edges = {0, 1, LINE_READ - 1, LINE_READ, LINE_READ + 1, READ_CHUNK, READ_CHUNK + LINE_READ + 1, total}
    windows = [(after, upto) for after in edges for upto in [None, *edges] if upto is None or upto >= after]
    windows += [
        (after, after + width) for after in (0, 7, total - LINE_READ) for width in (LINE_READ, LINE_READ + 1)
    ]
    for after, upto in windows:
        end = total if upto is None else min(upto, total)
        expected = [Record(version, stored[version - 1]) for version in range(after + 1, end + 1)]
        assert await bounded(redis_store.read(game_id, after, upto)) == expected, (after, upto)


async def test_envelopes_are_stored_as_exact_bytes(redis_store: RedisEventStore) -> None:
    game_id, odd = new_id(), bytes(range(256))
    await bounded(redis_store.create(game_id, odd, {}))
    await bounded(append(redis_store, game_id, 1, [odd[::-1]], "c"))
    assert await bounded(redis_store.read(game_id)) == [Record(1, odd), Record(2, odd[::-1])]


async def test_a_driver_error_other_than_a_conflict_is_a_store_error(redis_store: RedisEventStore) -> None:
    game_id = new_id()
    await bounded(redis_store.client.set(f"orchestra:{{{game_id}}}:events", "not a stream"))
    with pytest.raises(StoreError) as caught:
        await bounded(append(redis_store, game_id, 1, [b"x"], "c"))
    assert type(caught.value) is StoreError and "WRONGTYPE" in str(caught.value)


async def test_from_url_detects_a_standalone_redis(redis_store: RedisEventStore) -> None:
    assert type(redis_store.client) is redis.asyncio.Redis


async def test_a_unix_socket_url_works(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="orc") as short:  # sun_path is ~107 bytes
        sock = Path(short) / "r.sock"
        server = RedisProcess(tmp_path / "unix", "--unixsocket", str(sock)).start()
        try:
            async with opened(f"unix://{sock}") as store:
                game_id = new_id()
                await bounded(store.create(game_id, b"1", {}))
                assert await bounded(store.version(game_id)) == 1
        finally:
            server.stop()


async def test_a_closed_port_gives_store_unavailable_quickly() -> None:
    async with opened(f"redis://127.0.0.1:{free_port()}") as store:
        started = time.monotonic()
        for call in (store.read("g"), store.version("g"), store.games(), append(store, "g", 1, [b"x"], "c")):
            with pytest.raises(StoreUnavailable):
                await bounded(call)
        with pytest.raises(StoreUnavailable):
            await bounded(anext(store.tail("g", 0)))
        assert await bounded(store.ping()) is False
        assert time.monotonic() - started < 3


async def test_from_url_on_an_unreachable_redis_raises_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable):
        await bounded(RedisEventStore.from_url(f"redis://127.0.0.1:{free_port()}"))


async def test_a_stopped_redis_gives_store_unavailable_and_a_restarted_one_works_again(
    own_redis: RedisProcess,
) -> None:
    async with opened(own_redis.url) as store:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        own_redis.stop()
        with pytest.raises(StoreUnavailable):
            await bounded(append(store, game_id, 1, [b"2"], "c"))
        own_redis.start()  # no persistence here: the restarted Redis is empty
        await bounded(store.create(game_id, b"1", {}))
        assert (await bounded(append(store, game_id, 1, [b"2"], "c"))).last == 2


async def test_a_hung_redis_gives_store_unavailable_within_the_timeout(own_redis: RedisProcess) -> None:
    async with opened(own_redis.url, timeout=0.3, block_ms=200) as store:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        assert own_redis.process is not None
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="no answer within 0.3 s"):
                await bounded(store.read(game_id))
            with pytest.raises(StoreUnavailable):
                await bounded(anext(store.tail(game_id, 1)))
            assert time.monotonic() - started < 3
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        # The connections cut short were closed, so no late reply reaches a later call.
        for _ in range(5):
            assert [r.data for r in await bounded(store.read(game_id))] == [b"1"]
        assert (await bounded(append(store, game_id, 1, [b"2"], "c"))).last == 2
        assert await bounded(store.version(game_id)) == 2


async def test_a_tail_fails_with_store_unavailable_when_redis_goes_away(own_redis: RedisProcess) -> None:
    async with opened(own_redis.url) as store:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        tail = store.tail(game_id, 1)
        waiting = asyncio.ensure_future(anext(tail))
        channel = appended_channel(game_id)
        await until(lambda: subscribers(store, [channel]), what="the tail's subscription")
        own_redis.stop()
        with pytest.raises(StoreUnavailable):
            await bounded(waiting, 3)
        await bounded(tail.aclose())


async def test_closing_a_tail_ends_its_subscription(own_redis: RedisProcess) -> None:
    async with opened(own_redis.url) as store:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        channel = appended_channel(game_id, 0)
        tail = store.tail(game_id, 0)
        assert [r.data for r in await bounded(anext(tail))] == [b"1"]  # subscribed before its first read
        assert await subscribers(store, [channel]) == {channel: 1}
        await bounded(tail.aclose())
        await until(lambda: unsubscribed(store, [channel]), 3, "the channel unsubscribed")


async def test_tails_share_one_subscriber_connection_and_cancelling_them_unsubscribes(
    own_redis: RedisProcess,
) -> None:
    async with opened(own_redis.url) as store:
        games = [new_id() for _ in range(20)]
        channels = [appended_channel(game_id, 0) for game_id in games]

        async def follow(game_id: str) -> None:
            async for _ in store.tail(game_id, 0):
                pass

        tasks = [asyncio.create_task(follow(game_id)) for game_id in games]
        tasks += [asyncio.create_task(follow(games[0]))]  # a second tail of one game: one subscription
        expected = {channel: 1 for channel in channels}
        await until(lambda: subscribed(store, expected), 3, "a subscription per game")
        assert await blocked_clients(store) == 0  # no blocked read per game
        assert await subscriber_connections(store) == 1
        started = time.monotonic()
        for task in tasks:
            task.cancel()
        await bounded(asyncio.gather(*tasks, return_exceptions=True), 1)
        assert time.monotonic() - started < 1
        await until(lambda: unsubscribed(store, channels), 3, "every channel unsubscribed")


async def test_a_tail_delivers_every_append_its_callers_own_too_and_reads_once_per_batch(
    own_redis: RedisProcess,
) -> None:
    """The tail takes no callback: the caller's own appends come back in its batches (the owner skips
    what it folded), each version once; a notice of a version a read already took reads nothing."""
    async with opened(own_redis.url) as store:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        batches: asyncio.Queue[list[Record]] = asyncio.Queue()

        async def follow() -> None:
            async for batch in store.tail(game_id, 1):
                batches.put_nowait(batch)

        task = asyncio.create_task(follow())
        try:
            # An append, read: the tail has subscribed, read what came before and waits.
            await bounded(append(store, game_id, 1, [b"2"], "other-2"))
            assert await bounded(batches.get(), 3) == [Record(2, b"2")]
            reads = await xranges(store)
            # Ten appends at once: ten notices, fewer reads when one read takes several appends.
            await bounded(
                asyncio.gather(
                    *(append(store, game_id, v - 1, [str(v).encode()], f"own-{v}") for v in range(3, 13))
                )
            )
            delivered: list[Record] = []
            while len(delivered) < 10:
                delivered += await bounded(batches.get(), 3)
            assert delivered == [Record(v, str(v).encode()) for v in range(3, 13)]
            # The sentinel: its read comes after every notice of the ten, so a read of any of them would
            # have been counted by now, and a batch delivered twice would be in the queue before it.
            await bounded(append(store, game_id, 12, [b"13"], "other-13"))
            assert await bounded(batches.get(), 3) == [Record(13, b"13")]
            assert batches.empty()
            batches_read = await xranges(store) - reads
            assert batches_read <= 11  # one per batch delivered at most: none for a notice already read
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_notices_stay_within_their_database(own_redis: RedisProcess) -> None:
    # Channels are shared by every database of a Redis: deployments on databases 0 and 1 must not wake
    # each other's tails, even for the same game id.
    game_id = new_id()
    async with opened(own_redis.url + "/0") as zero, opened(own_redis.url + "/1") as one:
        await bounded(zero.create(game_id, b"0:1", {}))
        await bounded(one.create(game_id, b"1:1", {}))
        batches: asyncio.Queue[list[Record]] = asyncio.Queue()

        async def follow() -> None:
            async for batch in one.tail(game_id, 1):
                batches.put_nowait(batch)

        task = asyncio.create_task(follow())
        try:
            # An append of database 1, read: the tail has subscribed, read what came before and waits.
            await bounded(append(one, game_id, 1, [b"1:2"], "o2"))
            assert await bounded(batches.get(), 3) == [Record(2, b"1:2")]
            reads = await xranges(one)
            for version in range(2, 7):
                await bounded(append(zero, game_id, version - 1, [f"0:{version}".encode()], f"z{version}"))
            # The sentinel, database 1's next append: a wake-up by database 0's would have read before it.
            await bounded(append(one, game_id, 2, [b"1:3"], "o3"))
            assert await bounded(batches.get(), 3) == [Record(3, b"1:3")]
            assert batches.empty() and await xranges(one) == reads + 1
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_frozen_redis_fails_an_established_tail_within_heartbeat_and_timeout(
    own_redis: RedisProcess,
) -> None:
    async with opened(own_redis.url, timeout=0.3, block_ms=300) as store:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        tail = store.tail(game_id, 0)
        assert await bounded(anext(tail)) == [Record(1, b"1")]
        waiting = asyncio.ensure_future(anext(tail))
        assert own_redis.process is not None
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="no answer within 0.3 s"):
                await bounded(waiting, 3)
            assert time.monotonic() - started < 1.5
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        await bounded(tail.aclose())
        # A new tail works again, on a new subscriber connection.
        tail = store.tail(game_id, 0)
        assert await bounded(anext(tail)) == [Record(1, b"1")]
        await bounded(append(store, game_id, 1, [b"2"], "after"))
        assert await bounded(anext(tail)) == [Record(2, b"2")]
        await bounded(tail.aclose())


async def test_a_tail_cancelled_while_it_reads_leaves_its_connection_open(own_redis: RedisProcess) -> None:
    """A game's tail stops whenever its last client leaves, often while it reads: the read finishes on its
    own, so the connection goes back to the pool open (redis-py closes one whose reply it stopped
    reading, and the next call would open and set up another)."""
    assert own_redis.process is not None
    pid = own_redis.process.pid
    async with opened(own_redis.url) as store:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        first = store.tail(game_id, 0)  # opens the subscriber connection
        assert await bounded(anext(first)) == [Record(1, b"1")]
        await bounded(first.aclose())
        before = await bounded(store.client.info("stats"))

        tail = store.tail(game_id, 1)
        reading = asyncio.ensure_future(anext(tail))
        await until(lambda: subscribed(store, {appended_channel(game_id): 1}), 3, "the tail subscribed")
        # Redis sends the append's notice with its answer: stopped at once, it leaves the tail's read of
        # the new version waiting in its socket.
        await bounded(append(store, game_id, 1, [b"2"], "c2"))
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(lambda: unread_by(own_redis.port), 2, "the read sent to the stopped Redis")
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
        finally:
            os.kill(pid, signal.SIGCONT)
        await bounded(tail.aclose())
        await until(lambda: not read_in_flight(), 2, "the cut-short read finished")
        assert await bounded(store.read(game_id)) == [Record(1, b"1"), Record(2, b"2")]
        after = await bounded(store.client.info("stats"))
        assert after["total_connections_received"] == before["total_connections_received"]


async def subscribers(store: RedisEventStore, channels: list[str]) -> dict[str, int]:
    counts = await bounded(store.client.pubsub_numsub(*channels))
    # The store's clients leave replies as bytes.
    return {cast(bytes, name).decode(): count for name, count in counts if count}


async def subscribed(store: RedisEventStore, expected: dict[str, int]) -> bool:
    return await subscribers(store, list(expected)) == expected


async def unsubscribed(store: RedisEventStore, channels: list[str]) -> bool:
    return await subscribers(store, channels) == {}


def unread_by(port: int) -> bool:
    """Whether bytes wait unread in a socket of the server on loopback `port` (/proc/net/tcp's rx_queue):
    a command sent to a stopped Redis."""
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and int(fields[4].split(":")[1], 16) > 0:
            return True
    return False


def read_in_flight() -> bool:
    """Whether a store read left running by a cancelled tail is still under way (a task of its own)."""
    return any(
        getattr(task.get_coro(), "__qualname__", "") == "RedisEventStore.read" and not task.done()
        for task in asyncio.all_tasks()
    )


async def subscriber_connections(store: RedisEventStore) -> int:
    clients = await bounded(store.client.client_list())
    return sum(1 for client in clients if int(client.get("sub", 0)) > 0)


async def xranges(store: RedisEventStore) -> int:
    stats = await bounded(store.client.info("commandstats"))
    return int(stats.get("cmdstat_xrange", {}).get("calls", 0))


async def blocked_clients(store: RedisEventStore) -> int:
    info = await bounded(store.client.info("clients"))
    return int(info["blocked_clients"])


async def test_an_append_notice_is_read_without_being_formatted_for_a_debug_line(
    redis_store: RedisEventStore, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # redis-py's default push handler logs str(message) at debug for every notice it reads; ours reads
    # them as they are. With that logger at debug, a notice read by the default handler would show.
    game_id = new_id()
    await bounded(redis_store.create(game_id, b"1", {}))
    tail = redis_store.tail(game_id, 1)
    try:
        waiting = asyncio.ensure_future(anext(tail))
        channel = appended_channel(game_id, int(urlsplit(redis_url).path.strip("/") or 0))
        await until(lambda: subscribers(redis_store, [channel]), what="the tail's subscription")
        with caplog.at_level("DEBUG", logger="push_response"):
            await bounded(append(redis_store, game_id, 1, [b"2"], "cmd-1"))
            batch = await bounded(waiting)
        assert [record.version for record in batch] == [2]
        assert not [r for r in caplog.records if r.name == "push_response"]
    finally:
        await bounded(tail.aclose())
