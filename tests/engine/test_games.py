"""The games of a node: decide on the state held, append with the expected version, retry on conflict."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from domain import InstrumentToken, PerformanceToken, Place, Rejected, RepairToken, Token
from domain.messages import EndGame
from projections import project
from server.engine.games import Games
from server.protocol import envelope
from server.store import EventStore
from server.store.memory import MemoryEventStore
from server.store.redis import RedisEventStore

pytestmark = pytest.mark.integration

TOKENS: list[tuple[Token, str]] = [
    (PerformanceToken("classical"), "viola"),
    (PerformanceToken("classical"), "violin_bc"),
    (RepairToken("strings"), "viola"),
    (RepairToken("winds"), "clarinet"),
    (PerformanceToken("romantic"), "cello"),
    (InstrumentToken("rare_winds"), "rare_winds"),
]


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    if request.param == "memory":
        yield MemoryEventStore()
        return
    adapter = await RedisEventStore.from_url(request.getfixturevalue("redis_url"))
    try:
        yield adapter
    finally:
        await adapter.close()


async def _fold(store: EventStore, game_id: str):  # type: ignore[no-untyped-def]
    records = await store.read(game_id)
    return project(envelope.decode(r.data).event for r in records)


async def test_two_nodes_racing_2000_placements_lose_and_duplicate_nothing(store: EventStore) -> None:
    """Two "nodes" share one store; many tasks on each place into one game at once."""
    node_a = Games(store, max_placements=5000, retries=50)
    node_b = Games(store, max_placements=5000, retries=50)
    created = await node_a.create(["Ada", "Ben", "Cy", "Dee"])
    game_id = created.game_id
    rng = random.Random(7)
    plan = [(rng.choice((node_a, node_b)), seat, i) for i in range(2000) for seat in [rng.randrange(4)]]

    async def worker(share: list[tuple[Games, int, int]]) -> list[int]:
        versions: list[int] = []
        for node, seat, i in share:
            token, space = TOKENS[i % len(TOKENS)]
            outcome = await node.handle(game_id, Place(seat=seat, id=f"p{i}", token=token, space=space))
            versions.append(outcome.version)
        return versions

    shares = [plan[k::16] for k in range(16)]
    results = await asyncio.wait_for(asyncio.gather(*(worker(s) for s in shares)), 120)
    versions = sorted(v for r in results for v in r)
    assert versions == list(range(2, 2002)), "every placement has exactly one version, contiguous"
    records = await store.read(game_id)
    assert [r.version for r in records] == list(range(1, 2002))
    ids = [str(envelope.decode(r.data).command_id) for r in records[1:]]
    assert sorted(ids) == sorted(f"p{i}" for i in range(2000))
    # Both nodes' cached states equal a replay of the stream.
    rebuilt = await _fold(store, game_id)
    for node in (node_a, node_b):
        live = await node.get(game_id, refresh=True)
        assert live is not None
        assert live.view == rebuilt.view
        assert live.state == rebuilt.game


async def test_a_repeated_id_returns_the_first_outcome_even_after_the_game_ended(store: EventStore) -> None:
    service = Games(store)
    game_id = (await service.create(["Ada", "Ben"])).game_id
    place = Place(seat=1, id="once", token=PerformanceToken("classical"), space="viola")
    first = await service.handle(game_id, place)
    await service.handle(game_id, EndGame(seat=0, id="end"))
    again = await service.handle(game_id, place)
    assert again == first
    assert len(await store.read(game_id)) == 3


async def test_a_rejected_id_is_decided_afresh_next_time(store: EventStore) -> None:
    service = Games(store)
    game_id = (await service.create(["Ada"])).game_id
    bad = Place(seat=0, id="r1", token=RepairToken("winds"), space="viola")
    with pytest.raises(Rejected) as caught:
        await service.handle(game_id, bad)
    assert caught.value.code == "illegal_space"
    good = Place(seat=0, id="r1", token=RepairToken("strings"), space="viola")
    outcome = await service.handle(game_id, good)
    assert outcome.version == 2


async def test_a_stale_cache_catches_up_before_deciding(store: EventStore) -> None:
    """Node B's cached state is behind; its command is decided on the fresh state, not the stale one."""
    node_a, node_b = Games(store), Games(store)
    game_id = (await node_a.create(["Ada", "Ben"])).game_id
    await node_b.get(game_id)  # B holds version 1
    await node_a.handle(game_id, Place(seat=0, id="a1", token=PerformanceToken("classical"), space="viola"))
    outcome = await node_b.handle(
        game_id, Place(seat=1, id="b1", token=PerformanceToken("classical"), space="viola")
    )
    assert outcome.version == 3
    event = envelope.decode(outcome.envelopes[0]).event
    assert type(event).__name__ == "PlacedBelowLine"  # Ada holds the chair: a tie, no steal


async def test_envelopes_chain_each_to_the_hash_of_the_one_before(store: EventStore) -> None:
    service = Games(store)
    game_id = (await service.create(["Ada"])).game_id
    for i, space in enumerate(("viola", "clarinet", "timpani")):
        await service.handle(
            game_id, Place(seat=0, id=f"c{i}", token=PerformanceToken("classical"), space=space)
        )
    records = await store.read(game_id)
    assert envelope.decode(records[0].data).prev == envelope.GENESIS
    for before, after in zip(records, records[1:], strict=False):
        assert envelope.decode(after.data).prev == envelope.chain_hash(before.data)


async def test_games_beyond_the_cache_cap_are_evicted_and_reload_on_use(store: EventStore) -> None:
    service = Games(store, max_live_games=3)
    ids = [(await service.create(["Ada"])).game_id for _ in range(5)]
    for game_id in ids:
        await service.get(game_id)
    assert (
        len(service) == 3
        and [service.loaded(game_id) is not None for game_id in ids] == [False] * 2 + [True] * 3
    )
    outcome = await service.handle(
        ids[0], Place(seat=0, id="x", token=PerformanceToken("baroque"), space="lute")
    )
    assert outcome.version == 2 and service.loaded(ids[0]) is not None
