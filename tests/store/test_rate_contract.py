"""The rate buckets of the store port, one contract for every adapter (memory, Redis, Redis Cluster): a
burst, then a refusal naming the wait, a token back once it has passed; refusals spend nothing; buckets
are apart from one another."""

from __future__ import annotations

import asyncio

import pytest

from server.store import RateBuckets
from tests.support.redis import bounded, new_id


async def test_a_burst_then_a_refusal_that_names_the_wait_then_a_token_once_it_has_passed(
    store: RateBuckets,
) -> None:
    bucket = new_id()
    assert [await bounded(store.take_token(bucket, 5.0, 3)) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = await bounded(store.take_token(bucket, 5.0, 3))
    assert 0.0 < wait <= 0.2 + 0.01  # a token every 0.2 s
    # Refused attempts spend nothing: the wait only shrinks as time passes.
    again = await bounded(store.take_token(bucket, 5.0, 3))
    assert 0.0 < again <= wait + 0.01
    await asyncio.sleep(again + 0.03)
    assert await bounded(store.take_token(bucket, 5.0, 3)) == 0.0
    assert await bounded(store.take_token(bucket, 5.0, 3)) > 0.0  # one token came back, not more


async def test_buckets_are_apart(store: RateBuckets) -> None:
    first, second = new_id(), new_id()
    assert await bounded(store.take_token(first, 1.0, 1)) == 0.0
    assert await bounded(store.take_token(first, 1.0, 1)) == pytest.approx(1.0, abs=0.05)
    assert await bounded(store.take_token(second, 1.0, 1)) == 0.0


async def test_a_bucket_left_alone_fills_up_to_its_burst_and_no_more(store: RateBuckets) -> None:
    bucket = new_id()
    assert await bounded(store.take_token(bucket, 50.0, 2)) == 0.0
    await asyncio.sleep(0.2)  # ten tokens' time: the bucket holds its burst of 2 again, not 10
    assert [await bounded(store.take_token(bucket, 50.0, 2)) for _ in range(2)] == [0.0, 0.0]
    assert await bounded(store.take_token(bucket, 50.0, 2)) > 0.0
