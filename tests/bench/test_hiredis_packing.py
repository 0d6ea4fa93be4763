"""bench.hiredis_packing (the benchmarks' redis-py baselines): the installed redis-py and hiredis have
what it relies on, and commands packed by hiredis are byte for byte what redis-py's own packer writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from bench.hiredis_packing import HiredisPacking, missing, use_hiredis_packing, with_hiredis_packing
from server.compat import installed
from tests.support.redis import bounded


def test_the_installed_redis_py_and_hiredis_have_what_compat_relies_on() -> None:
    gaps = missing()
    assert not gaps, (
        f"bench/hiredis_packing.py does not fit redis {installed('redis')} / hiredis {installed('hiredis')}: "
        + "; ".join(gaps)
    )


ours = with_hiredis_packing(Connection)()
# redis-py's asyncio packer, written in Python: the oracle.
theirs = Connection()


def _packed(connection: AbstractConnection, *args: object) -> bytes:
    return b"".join(bytes(chunk) for chunk in connection.pack_command(*args))  # type: ignore[arg-type]


arguments = st.lists(
    st.one_of(
        st.binary(max_size=300),
        st.text(max_size=50),
        st.integers(min_value=-(2**70), max_value=2**70),
    ),
    max_size=150,
)


@given(name=st.sampled_from(["EVALSHA", "XADD", b"HSET", "SCRIPT LOAD", b"CLIENT SETNAME"]), rest=arguments)
def test_the_bytes_are_redis_pys_own(name: str | bytes, rest: list[object]) -> None:
    assert _packed(ours, name, *rest) == _packed(theirs, name, *rest)


def test_a_big_round_is_one_buffer_with_the_same_bytes() -> None:
    envelope = b"x" * 400
    args: list[Any] = ["EVALSHA", "a" * 40, 60]
    for i in range(20):
        args += [f"orchestra:{{g{i}}}:events", f"orchestra:{{g{i}}}:commands", f"orchestra:{{g{i}}}:appended"]
    for i in range(20):
        args += [i, f"key{i}", 1, envelope]
    packed = ours.pack_command(*args)
    assert len(packed) == 1
    assert packed[0] == _packed(theirs, *args)


def test_what_hiredis_refuses_gets_redis_pys_error() -> None:
    with pytest.raises(DataError):
        ours.pack_command("SET", "k", True)
    with pytest.raises(DataError):
        theirs.pack_command("SET", "k", True)


@pytest.mark.parametrize("cls", [Connection, SSLConnection, UnixDomainSocketConnection])
def test_every_kind_of_connection_keeps_its_class(cls: type[Connection]) -> None:
    packed = with_hiredis_packing(cls)
    assert issubclass(packed, cls) and issubclass(packed, HiredisPacking)
    assert with_hiredis_packing(packed) is packed


@pytest.mark.parametrize(
    ("url", "cls"),
    [
        ("redis://127.0.0.1:1/0", Connection),
        ("rediss://127.0.0.1:1/0", SSLConnection),
        ("unix:///tmp/nowhere.sock", UnixDomainSocketConnection),
    ],
)
async def test_a_client_told_to_packs_with_hiredis_over_its_urls_kind_of_connection(
    url: str, cls: type[Connection]
) -> None:
    client = Redis.from_url(url)
    try:
        assert use_hiredis_packing(client) is client
        made = client.connection_pool.make_connection()  # type: ignore[no-untyped-call]
        assert isinstance(made, HiredisPacking) and isinstance(made, cls)
    finally:
        await client.aclose()


@pytest.mark.integration
async def test_a_client_packing_with_hiredis_runs_commands(redis_url: str) -> None:
    client = use_hiredis_packing(Redis.from_url(redis_url))
    try:
        assert await bounded(client.echo(b"x" * 1000)) == b"x" * 1000
    finally:
        await client.aclose()
