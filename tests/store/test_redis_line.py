"""The store's own connections (its lines): pipelined calls answered in order, and every way they can fail."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import time
from pathlib import Path

import pytest
import redis.asyncio
from redis import exceptions as rx

from server.store import Append, Appended, ConcurrencyConflict, Record, StoreUnavailable
from server.store.redis import APPEND_SCRIPT, LINE_READ, RedisEventStore
from server.store.redis.keys import commands_key, events_key
from server.store.redis.line import LineProtocol, ScriptLine, error_of
from tests.support.appends import append
from tests.support.redis import RedisProcess, bounded, new_id
from tests.support.waiting import until

pytestmark = pytest.mark.integration

ECHO = "return {KEYS[1], ARGV[1]}"
BOOM = "return redis.error_reply('boom')"


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()


ECHO_SHA = _sha(ECHO)


async def _clients(url: str) -> int:
    client = redis.asyncio.Redis.from_url(url)
    try:
        return len(await client.client_list())
    finally:
        await client.aclose()


async def _connections_made(url: str) -> int:
    """How many connections the Redis has accepted since it started (this call's own included)."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        return int((await client.info("stats"))["total_connections_received"])
    finally:
        await client.aclose()


async def test_concurrent_calls_share_one_connection_and_each_gets_its_own_reply(redis_url: str) -> None:
    line = ScriptLine.for_url(redis_url, 2.0)
    assert line is not None
    try:
        before = await bounded(_clients(redis_url))
        replies = await bounded(
            asyncio.gather(*(line.script(ECHO_SHA, ECHO, [f"k{i}"], [i], 2.0) for i in range(200)))
        )
        assert replies == [[f"k{i}".encode(), str(i).encode()] for i in range(200)]
        assert await bounded(_clients(redis_url)) == before + 1
    finally:
        await line.close()


async def test_a_script_redis_does_not_hold_is_sent_whole(redis_url: str) -> None:
    line = ScriptLine.for_url(redis_url, 2.0)
    assert line is not None
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        await bounded(admin.script_flush())
        assert await bounded(admin.script_exists(ECHO_SHA)) == [False]
        assert await bounded(line.script(ECHO_SHA, ECHO, ["k"], ["v"], 2.0)) == [b"k", b"v"]
        assert await bounded(admin.script_exists(ECHO_SHA)) == [True]
    finally:
        await line.close()
        await admin.aclose()


async def test_error_replies_are_redis_pys_exceptions(redis_url: str) -> None:
    line = ScriptLine.for_url(redis_url, 2.0)
    assert line is not None
    try:
        with pytest.raises(rx.ResponseError, match="boom"):
            await bounded(line.script(_sha(BOOM), BOOM, [], [], 2.0))
        # The line is still good after an error reply.
        assert await bounded(line.script(ECHO_SHA, ECHO, ["k"], [1], 2.0)) == [b"k", b"1"]
    finally:
        await line.close()


@pytest.mark.parametrize(
    ("reply", "kind", "message"),
    [
        ("LOADING Redis is loading the dataset in memory", rx.BusyLoadingError, "Redis is loading"),
        ("READONLY You can't write against a read only replica.", rx.ReadOnlyError, "You can't write"),
        ("OOM command not allowed when used memory > 'maxmemory'.", rx.OutOfMemoryError, "command not"),
        ("NOSCRIPT No matching script.", rx.NoScriptError, "No matching script"),
        ("NOAUTH Authentication required.", rx.AuthenticationError, "Authentication required"),
        ("WRONGPASS invalid username-password pair", rx.AuthenticationError, "invalid username"),
        ("NOPERM this user has no permissions", rx.NoPermissionError, "this user"),
        ("TRYAGAIN Multiple keys request during rehashing of slot", rx.TryAgainError, "Multiple keys"),
        ("MASTERDOWN Link with MASTER is down", rx.MasterDownError, "Link with MASTER"),
        ("CLUSTERDOWN The cluster is down", rx.ClusterDownError, "The cluster is down"),
        ("ERR max number of clients reached", rx.ConnectionError, "max number of clients reached"),
        ("ERR invalid password", rx.AuthenticationError, "invalid password"),
        ("ERR unknown command 'NOPE'", rx.ResponseError, "unknown command"),
        ("CONFLICT 7", rx.ResponseError, "CONFLICT 7"),
        ("NOGAME", rx.ResponseError, "NOGAME"),
        ("EXISTS g1", rx.ResponseError, "EXISTS g1"),
    ],
)
def test_an_error_reply_becomes_the_exception_redis_py_raises_for_it(
    reply: str, kind: type[rx.RedisError], message: str
) -> None:
    error = error_of(reply)
    assert type(error) is kind
    assert str(error).startswith(message)


async def test_an_error_reply_is_the_same_exception_over_the_line_and_over_redis_py(redis_url: str) -> None:
    script = "return redis.error_reply('READONLY not here')"
    line = ScriptLine.for_url(redis_url, 2.0)
    client = redis.asyncio.Redis.from_url(redis_url)
    assert line is not None
    try:
        with pytest.raises(rx.RedisError) as theirs:
            await bounded(client.eval(script, 0))
        with pytest.raises(rx.RedisError) as ours:
            await bounded(line.script(_sha(script), script, [], [], 2.0))
        assert type(ours.value) is type(theirs.value) is rx.ReadOnlyError
        assert str(ours.value) == str(theirs.value)
    finally:
        await line.close()
        await client.aclose()


async def test_a_password_and_a_database_in_the_url_are_used(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path / "auth").start()
    admin = redis.asyncio.Redis.from_url(server.url)
    try:
        await bounded(admin.config_set("requirepass", "s3cret"))
        host = server.url.removeprefix("redis://")
        with_store = await bounded(RedisEventStore.from_url(f"redis://:s3cret@{host}/3", cluster=False))
        try:
            game_id = new_id()
            await bounded(with_store.create(game_id, b"1", {}))
            assert await bounded(append(with_store, game_id, 1, [b"2"], "c")) == Appended(2, 2, False)
        finally:
            await bounded(with_store.close())
        checker = redis.asyncio.Redis.from_url(f"redis://:s3cret@{host}/3")
        try:
            assert await bounded(checker.xlen(events_key(game_id))) == 2
        finally:
            await checker.aclose()
        wrong = ScriptLine.for_url(f"redis://:wrong@{host}/3", 2.0)
        assert wrong is not None
        with pytest.raises(rx.AuthenticationError):
            await bounded(wrong.script(ECHO_SHA, ECHO, ["k"], [1], 2.0))
        await wrong.close()
    finally:
        await admin.aclose()
        server.stop()


def test_tls_urls_are_left_to_redis_py() -> None:
    assert ScriptLine.for_url("rediss://127.0.0.1:6380", 2.0) is None
    assert ScriptLine.for_url("unix:///tmp/redis.sock", 2.0) is not None


async def test_a_hung_redis_fails_appends_in_time_and_no_late_reply_reaches_a_later_call(
    own_redis: RedisProcess,
) -> None:
    store = await bounded(RedisEventStore.from_url(own_redis.url, cluster=False, timeout=0.3))
    try:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        assert (await bounded(append(store, game_id, 1, [b"2"], "a"))).last == 2
        assert own_redis.process is not None
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            calls = [append(store, game_id, 2, [b"3"], "b"), append(store, game_id, 2, [b"3"], "c")]
            started = time.monotonic()
            for outcome in await bounded(asyncio.gather(*calls, return_exceptions=True)):
                assert isinstance(outcome, StoreUnavailable)
                assert "no answer within 0.3 s" in str(outcome)
            assert time.monotonic() - started < 1.0
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        # Redis ran what it had read before it stopped, or not: either way each later call gets its own
        # reply, never one of the calls that gave up.
        version = await bounded(store.version(game_id))
        assert version in (2, 3)
        with pytest.raises(ConcurrencyConflict):
            await bounded(append(store, game_id, version - 1, [b"x"], "d"))
        assert await bounded(append(store, game_id, version, [b"4"], "e")) == Appended(
            version + 1, version + 1, False
        )
        replies = await bounded(
            store.append_many([Append(game_id, version + 1, [b"5"], "f"), Append(game_id, 0, [b"?"], "g")])
        )
        assert replies[0] == Appended(version + 2, version + 2, False)
        assert isinstance(replies[1], ConcurrencyConflict)
    finally:
        await bounded(store.close())


async def test_a_repeated_append_after_a_lost_connection_gives_the_first_outcome(
    own_redis: RedisProcess,
) -> None:
    store = await bounded(RedisEventStore.from_url(own_redis.url, cluster=False))
    admin = redis.asyncio.Redis.from_url(own_redis.url)
    try:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        assert (await bounded(append(store, game_id, 1, [b"2"], "a"))).last == 2
        await bounded(admin.client_kill_filter(_type="normal", skipme=True))  # every client but this one
        # The line finds its connection gone, connects again and sends once more.
        assert await bounded(append(store, game_id, 2, [b"3"], "b")) == Appended(3, 3, False)
        assert await bounded(append(store, game_id, 2, [b"3"], "b")) == Appended(3, 3, True)
        assert await bounded(admin.hget(commands_key(game_id), "b")) == b"3 3"
    finally:
        await admin.aclose()
        await bounded(store.close())


async def test_the_append_script_runs_under_the_hash_redis_py_would_use(redis_url: str) -> None:
    line = ScriptLine.for_url(redis_url, 2.0)
    assert line is not None
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        sha = admin.register_script(APPEND_SCRIPT).sha
        assert sha == _sha(APPEND_SCRIPT)
        game_id = new_id()
        keys = [events_key(game_id), commands_key(game_id)]
        reply = await bounded(line.script(sha, APPEND_SCRIPT, keys, [2, 0, "c", "", 1, b"x"], 2.0))
        assert reply == [[-1, b"NOGAME"]]
        assert await bounded(admin.script_exists(sha)) == [True]
    finally:
        await line.close()
        await admin.aclose()


class _Wire:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True


async def test_replies_split_anywhere_resolve_the_calls_in_order_and_a_stray_reply_drops_the_line() -> None:
    protocol = LineProtocol()
    wire = _Wire()
    protocol.connection_made(wire)  # type: ignore[arg-type]
    first, second = protocol.call(b"A"), protocol.call(b"B")
    data = b"*2\r\n$1\r\nx\r\n:7\r\n-ERR no\r\n"
    for offset in range(len(data)):
        protocol.data_received(data[offset : offset + 1])
    assert first.result() == [b"x", 7]
    assert str(second.result()) == "ERR no"
    assert not wire.aborted
    protocol.data_received(b":1\r\n")  # nobody asked for this one
    assert wire.aborted
    protocol.connection_lost(None)
    late = protocol.call(b"C")
    with pytest.raises(rx.ConnectionError):
        late.result()


async def test_the_stores_frequent_calls_take_two_connections_not_one_each(redis_url: str) -> None:
    """Creating 50 games, appending to them all at once, and loading them and their credentials all at
    once (what a hello reads) take the script line and the reads line, whatever the number of games; a
    read longer than a line's slice continues on a pooled connection of its own."""
    store = await bounded(RedisEventStore.from_url(redis_url, cluster=False))
    try:
        before = await bounded(_clients(redis_url))
        games = [new_id() for _ in range(50)]
        await bounded(asyncio.gather(*(store.create(game_id, b"1", {"seat:0": "h"}) for game_id in games)))
        outcomes = await bounded(
            asyncio.gather(*(append(store, game_id, 1, [b"2"], "c") for game_id in games))
        )
        assert outcomes == [Appended(2, 2, False)] * 50
        loaded = await bounded(asyncio.gather(*(store.read(game_id) for game_id in games)))
        assert loaded == [[Record(1, b"1"), Record(2, b"2")]] * 50
        held = await bounded(asyncio.gather(*(store.credentials(game_id) for game_id in games)))
        assert held == [{"seat:0": "h"}] * 50
        assert await bounded(_clients(redis_url)) == before + 2

        long_game = games[0]
        await bounded(append(store, long_game, 2, [b"x"] * (LINE_READ + 10), "long"))
        assert len(await bounded(store.read(long_game))) == LINE_READ + 12
        assert await bounded(_clients(redis_url)) == before + 3
    finally:
        await bounded(store.close())


async def test_a_cancelled_call_leaves_the_line_to_the_calls_behind_it(redis_url: str) -> None:
    """A caller cancelled while its call is in flight (a client that left mid-hello) costs the other
    callers nothing: the connection stays, and each later call gets its own reply."""
    line = ScriptLine.for_url(redis_url, 2.0)
    assert line is not None
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        assert await bounded(line.command(("ECHO", "warm"), 2.0)) == b"warm"
        await bounded(admin.ping())  # connected before the count
        before = await bounded(_connections_made(redis_url))
        slow = asyncio.ensure_future(line.command(("BLPOP", new_id(), "0.2"), 2.0))
        behind = asyncio.ensure_future(line.command(("ECHO", "behind"), 2.0))

        async def blocked() -> bool:
            return int((await admin.info("clients"))["blocked_clients"]) > 0

        await until(blocked, 2, "the BLPOP in flight")
        slow.cancel()
        assert await bounded(behind) == b"behind"
        assert await bounded(line.command(("ECHO", "after"), 2.0)) == b"after"
        assert await bounded(_connections_made(redis_url)) == before + 1  # this count's own
        assert slow.cancelled()
    finally:
        await line.close()
        await admin.aclose()


async def test_a_connection_made_after_its_callers_gave_up_is_the_lines_next_one(
    own_redis: RedisProcess,
) -> None:
    """A call whose connection is still being made at its deadline fails; the connection, once made, is
    the one the next call uses (it was left open and unused, one more each time, until collected)."""
    assert own_redis.process is not None
    pid = own_redis.process.pid
    # Database 1: connecting ends with a SELECT, which a stopped Redis leaves unanswered.
    line = ScriptLine.for_url(f"{own_redis.url}/1", 5.0)
    assert line is not None
    admin = redis.asyncio.Redis.from_url(own_redis.url)
    try:
        before = (await bounded(admin.info("stats")))["total_connections_received"]
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(rx.TimeoutError):
                await line.script(ECHO_SHA, ECHO, ["k"], [1], 0.3)
        finally:
            os.kill(pid, signal.SIGCONT)

        async def selected() -> bool:  # the SELECT is answered: the connection is made
            return any(int(client["db"]) == 1 for client in await admin.client_list())

        await until(selected, 2, "the line's connection on database 1")
        assert await bounded(line.script(ECHO_SHA, ECHO, ["k"], [2], 2.0)) == [b"k", b"2"]
        after = (await bounded(admin.info("stats")))["total_connections_received"]
        assert after == before + 1
    finally:
        await line.close()
        await admin.aclose()
