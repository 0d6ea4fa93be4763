"""The committer's `settled`: what a tail waits for before it decides a notice needs no read."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from domain import Place, RepairToken
from server.engine import envelope
from server.engine.committer import Outcome
from server.engine.service import GameService
from server.store import Appended, StoreError
from server.store.memory import MemoryEventStore


class GatedStore(MemoryEventStore):
    """A memory store whose grouped appends wait for a gate: a round held in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()

    async def append_many(
        self, batch: Sequence[tuple[str, int, Sequence[bytes], str]]
    ) -> list[Appended | StoreError]:
        self.entered.set()
        await self.gate.wait()
        return await super().append_many(batch)


async def test_settled_returns_only_once_the_rounds_appends_are_folded_in() -> None:
    store = GatedStore()
    service = GameService(store)
    game_id = (await service.create(["Ada", "Ben"])).game_id
    other_id = (await service.create(["Cy"])).game_id
    live = await service.live(game_id)
    assert live is not None and live.version == 1
    store.gate.clear()
    command = service.handle(game_id, Place(seat=0, id="a-1", token=RepairToken("winds"), space="oboe"))
    answer = asyncio.ensure_future(command)
    await asyncio.wait_for(store.entered.wait(), 1)
    settled = asyncio.ensure_future(service.committer.settled(game_id))
    await asyncio.sleep(0.05)
    assert not settled.done()  # the append is in flight
    await asyncio.wait_for(service.committer.settled(other_id), 1)  # a game not in the round: at once
    store.gate.set()
    await asyncio.wait_for(settled, 1)
    assert live.version == 2  # folded in by the time settled returns
    assert (await asyncio.wait_for(answer, 1)).version == 2
    await asyncio.wait_for(service.committer.settled(game_id), 1)  # no round: at once


async def test_settled_waits_for_the_running_round_only_not_for_every_later_one() -> None:
    store = GatedStore()
    service = GameService(store)
    game_id = (await service.create(["Ada", "Ben"])).game_id
    store.gate.clear()

    def place(index: int) -> asyncio.Future[object]:
        command = Place(seat=index % 2, id=f"p{index}", token=RepairToken("winds"), space="oboe")
        return asyncio.ensure_future(service.handle(game_id, command))

    first = place(0)
    await asyncio.wait_for(store.entered.wait(), 1)
    settled = asyncio.ensure_future(service.committer.settled(game_id))
    second = place(1)  # waits for the next round, which holds the same game
    await asyncio.sleep(0.05)
    assert not settled.done()
    store.entered.clear()
    store.gate.set()
    store.gate.clear()  # hold the next round in flight
    await asyncio.wait_for(store.entered.wait(), 1)
    await asyncio.wait_for(settled, 1)  # the first round is over, though the game is busy again
    assert game_id in service.committer.busy
    store.gate.set()
    await asyncio.wait_for(asyncio.gather(first, second), 1)


async def test_a_round_leaves_each_game_at_the_chain_head_of_its_last_stored_envelope() -> None:
    store = GatedStore()
    service = GameService(store)
    games = [(await service.create(["Ada", "Ben"])).game_id for _ in range(2)]
    store.gate.clear()
    commands = [
        service.handle(game_id, Place(seat=seat, id=f"c-{seat}", token=RepairToken("winds"), space="oboe"))
        for game_id in games
        for seat in (0, 1)
    ]
    answers = [asyncio.ensure_future(command) for command in commands]
    await asyncio.wait_for(store.entered.wait(), 1)
    store.gate.set()  # all four commands in one round: two per game
    await asyncio.wait_for(asyncio.gather(*answers), 1)
    for game_id in games:
        live = service.games[game_id]
        stored = await store.read(game_id)
        assert [record.version for record in stored] == [1, 2, 3]
        assert live.head == envelope.chain_hash(stored[-1].data)
        assert envelope.decode(stored[-1].data).prev == envelope.chain_hash(stored[-2].data)


async def test_a_commands_answer_comes_in_the_rounds_turn_before_its_game_is_published() -> None:
    store = GatedStore()
    service = GameService(store)
    game_id = (await service.create(["Ada", "Ben"])).game_id
    assert await service.live(game_id) is not None
    seen: list[str] = []
    service.listeners.append(lambda game, records: seen.append(f"published {records[-1].version}"))

    def answer(outcome: Outcome) -> None:
        seen.append(f"answered {outcome.version}")

    command = Place(seat=0, id="a-1", token=RepairToken("winds"), space="oboe")
    outcome = await asyncio.wait_for(service.handle(game_id, command, answer), 1)
    assert outcome.version == 2
    assert seen == ["answered 2", "published 2"]


async def test_a_caller_that_gave_up_gets_no_answer() -> None:
    store = GatedStore()
    service = GameService(store)
    game_id = (await service.create(["Ada", "Ben"])).game_id
    live = await service.live(game_id)
    assert live is not None
    answered: list[Outcome] = []
    store.gate.clear()
    command = Place(seat=0, id="a-1", token=RepairToken("winds"), space="oboe")
    pending = service.handle(game_id, command, answered.append)
    await asyncio.wait_for(store.entered.wait(), 1)
    pending.set_exception(TimeoutError())  # what the command's timer does
    store.gate.set()
    await asyncio.wait_for(service.committer.settled(game_id), 1)
    assert live.version == 2  # the command landed (a retry with its id gets this outcome) ...
    assert answered == []  # ... but its caller, already told "unavailable", is not answered twice
    pending.exception()
