"""One owner per live game, without sockets: the order of a round, one store call per game's waiting
commands, and no game waiting on another's append, load or read."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from domain import EndGame, PerformanceToken, Place, Rejected, RepairToken, TakeBack
from server.engine.games import Games
from server.engine.owner import Follower, LiveGame, Outcome
from server.engine.signing import Keyring
from server.ops.verify import verify
from server.protocol import envelope
from server.store import Append, Appended, Record, StoreError, StoreUnavailable
from server.store.memory import MemoryEventStore
from tests.support.commands import commands
from tests.support.waiting import until


class Recorded(MemoryEventStore):
    """A memory store that records each append call and can hold one game's appends or reads at a gate."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []  # the command keys of each append call
        self.gated: set[str] = set()  # games whose appends and reads wait for `release`
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def _gate(self, game_id: str) -> None:
        if game_id in self.gated:
            self.entered.set()
            await self.release.wait()

    async def append_many(self, batch: Sequence[Append]) -> list[Appended | StoreError]:
        self.calls.append([item.command_key for item in batch])
        await self._gate(batch[0][0])
        return await super().append_many(batch)

    async def read(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        await self._gate(game_id)
        return await super().read(game_id, after, until)


class Collecting:
    """A follower's outbox that keeps what it is given."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.frames: list[dict[str, Any]] = []
        self.log = log

    def put(self, data: bytes) -> None:
        frame = msgspec.json.decode(data)
        self.frames.append(frame)
        if self.log is not None:
            self.log.append(f"frame {frame['envelopes'][-1]['version']}")


def place(seat: int, id: str, space: str = "oboe") -> Place:
    return Place(seat=seat, id=id, token=RepairToken("winds"), space=space)


def follower(outbox: Collecting, view: str = "delta") -> Follower:
    return Follower(outbox, view)  # type: ignore[arg-type]


async def new_game(games: Games, players: int = 2) -> LiveGame:
    created = await games.create([f"P{n}" for n in range(players)])
    game = await games.get(created.game_id)
    assert game is not None
    return game


def submit(
    game: LiveGame, command: Place | TakeBack | EndGame, log: list[str] | None = None
) -> asyncio.Future[Outcome]:
    answered: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

    def reply(result: Outcome | Exception) -> None:
        if log is not None:
            log.append(f"answer {result.version if isinstance(result, Outcome) else type(result).__name__}")
        if isinstance(result, Outcome):
            answered.set_result(result)
        else:
            answered.set_exception(result)

    game.submit(command, reply)
    return answered


async def test_a_round_answers_then_folds_then_sends_one_frame_in_the_same_turn() -> None:
    games = Games(MemoryEventStore())
    game = await new_game(games)
    log: list[str] = []
    outbox = Collecting(log)
    game.follow(follower(outbox))
    answered = submit(game, place(0, "a-1"), log)
    await asyncio.wait_for(answered, 1)
    assert log == ["answer 2", "frame 2"]
    assert game.version == 2
    await games.close()


async def test_commands_of_one_game_that_arrive_together_go_in_one_store_call_and_one_frame() -> None:
    store = Recorded()
    games = Games(store)
    game = await new_game(games, players=3)
    outbox = Collecting()
    game.follow(follower(outbox))
    answers = [submit(game, place(seat, f"c-{seat}")) for seat in range(3)]
    outcomes = await asyncio.wait_for(asyncio.gather(*answers), 1)
    assert [o.version for o in outcomes] == [2, 3, 4]
    assert store.calls == [["0:c-0", "1:c-1", "2:c-2"]]
    (frame,) = outbox.frames
    assert [e["version"] for e in frame["envelopes"]] == [2, 3, 4]
    await games.close()


async def test_a_game_whose_append_is_stuck_holds_up_no_other_game() -> None:
    store = Recorded()
    games = Games(store, command_timeout=5)
    stuck, free = await new_game(games), await new_game(games)
    store.gated.add(stuck.game_id)
    waiting = submit(stuck, place(0, "s-1"))
    await asyncio.wait_for(store.entered.wait(), 1)
    # While the stuck game's append is in flight, the other game decides, appends and answers.
    for n in range(3):
        outcome = await asyncio.wait_for(submit(free, place(n % 2, f"f-{n}")), 1)
        assert outcome.version == n + 2
    assert not waiting.done()
    store.release.set()
    assert (await asyncio.wait_for(waiting, 1)).version == 2
    await games.close()


async def test_a_cold_load_of_one_game_holds_up_no_other_game() -> None:
    store = Recorded()
    games = Games(store)
    free = await new_game(games)
    cold_id = (await games.create(["Cy"])).game_id
    store.gated.add(cold_id)
    loading = asyncio.ensure_future(games.get(cold_id))
    await asyncio.wait_for(store.entered.wait(), 1)
    assert (await asyncio.wait_for(submit(free, place(0, "f-1")), 1)).version == 2
    assert not loading.done()
    store.release.set()
    loaded = await asyncio.wait_for(loading, 1)
    assert loaded is not None and loaded.version == 1
    await games.close()


async def test_callers_loading_one_game_at_once_share_one_read_and_one_owner() -> None:
    store = Recorded()
    games = Games(store)
    game_id = (await games.create(["Ada"])).game_id
    store.gated.add(game_id)
    loads = [asyncio.ensure_future(games.get(game_id)) for _ in range(5)]
    await asyncio.wait_for(store.entered.wait(), 1)
    store.release.set()
    loaded = await asyncio.wait_for(asyncio.gather(*loads), 1)
    assert all(game is loaded[0] for game in loaded) and loaded[0] is not None
    await games.close()


class CredentialReads(MemoryEventStore):
    """A memory store that counts credential reads, each in flight for a turn of the loop, and can fail
    the next one."""

    def __init__(self) -> None:
        super().__init__()
        self.credential_reads = 0
        self.fail_next = False

    async def credentials(self, game_id: str) -> dict[str, str]:
        self.credential_reads += 1
        await asyncio.sleep(0)
        if self.fail_next:
            self.fail_next = False
            raise StoreUnavailable("redis: down")
        return await super().credentials(game_id)


async def test_players_greeting_a_game_at_once_share_one_credentials_read_and_a_failed_read_is_retried() -> (
    None
):
    store = CredentialReads()
    games = Games(store)
    game = await new_game(games, players=3)
    store.fail_next = True
    failed = await asyncio.gather(*(game.credentials() for _ in range(3)), return_exceptions=True)
    assert [type(result) for result in failed] == [StoreUnavailable] * 3
    assert store.credential_reads == 1
    read = await asyncio.wait_for(asyncio.gather(*(game.credentials() for _ in range(3))), 1)
    assert store.credential_reads == 2
    assert read[0] == read[1] == read[2] and set(read[0]) == {"seat:0", "seat:1", "seat:2", "host"}
    assert await game.credentials() == read[0]
    assert store.credential_reads == 2  # read once: they never change
    await games.close()


async def test_a_round_leaves_the_game_at_the_chain_head_of_its_last_stored_envelope() -> None:
    store = MemoryEventStore()
    games = Games(store)
    game = await new_game(games)
    await asyncio.wait_for(asyncio.gather(*(submit(game, place(seat, f"c-{seat}")) for seat in (0, 1))), 1)
    stored = await store.read(game.game_id)
    assert [record.version for record in stored] == [1, 2, 3]
    assert game.folded.chain_head == envelope.chain_hash(stored[-1].data)
    assert envelope.decode(stored[-1].data).prev == envelope.chain_hash(stored[-2].data)
    await games.close()


async def test_a_command_unsettled_at_the_deadline_is_answered_unavailable_and_a_late_outcome_is_not() -> (
    None
):
    store = Recorded()
    games = Games(store, command_timeout=0.1)
    game = await new_game(games)
    store.gated.add(game.game_id)
    log: list[str] = []
    answered = submit(game, place(0, "late"), log)
    with pytest.raises(StoreUnavailable):
        await asyncio.wait_for(answered, 1)
    store.release.set()
    # It landed (a retry with its id gets this outcome) ...
    await until(lambda: game.version == 2, 1, "the late append folded")
    assert log == ["answer StoreUnavailable"]  # ... but its sender, told "unavailable", is not told twice
    again = await asyncio.wait_for(submit(game, place(0, "late")), 1)
    assert again.version == 2
    await games.close()


async def test_a_rejection_answers_its_sender_and_sends_nobody_a_frame() -> None:
    games = Games(MemoryEventStore())
    game = await new_game(games)
    outbox = Collecting()
    game.follow(follower(outbox))
    bad = Place(seat=0, id="r-1", token=RepairToken("winds"), space="viola")
    with pytest.raises(Exception) as refused:
        await asyncio.wait_for(submit(game, bad), 1)
    assert getattr(refused.value, "code", None) == "illegal_space"
    assert outbox.frames == [] and game.version == 1
    await games.close()


@pytest.mark.parametrize("view", ["delta", "full", "none"])
async def test_each_follower_gets_the_frame_of_its_view_mode(view: str) -> None:
    games = Games(MemoryEventStore())
    game = await new_game(games)
    outbox = Collecting()
    game.follow(follower(outbox, view))
    await asyncio.wait_for(submit(game, place(0, "v-1")), 1)
    (frame,) = outbox.frames
    keys = {"delta": {"view_delta"}, "full": {"view"}, "none": set()}[view]
    assert set(frame) == {"type", "envelopes", *keys}
    if view == "full":
        assert frame["view"] == msgspec.json.decode(game.view_json)
    await games.close()


async def test_another_nodes_appends_reach_this_nodes_followers_once_and_in_order() -> None:
    store = MemoryEventStore()
    here, there = Games(store), Games(store)
    game = await new_game(here)
    outbox = Collecting()
    game.follow(follower(outbox))
    for n in range(4):
        await asyncio.wait_for(there.handle(game.game_id, place(n % 2, f"t-{n}")), 1)
    await asyncio.wait_for(here.handle(game.game_id, place(0, "h-1")), 1)
    # The sentinel, a later append of the other node: a repeat of an earlier envelope would come before it.
    await asyncio.wait_for(there.handle(game.game_id, place(1, "t-last")), 1)

    def versions() -> list[int]:
        return [e["version"] for f in outbox.frames for e in f["envelopes"]]

    await until(lambda: versions()[-1:] == [7], 2, "the sentinel's envelope")
    assert versions() == [2, 3, 4, 5, 6, 7]
    await here.close()
    await there.close()


async def test_a_repeated_id_gets_its_first_outcome_and_appends_nothing() -> None:
    store = Recorded()
    games = Games(store)
    game = await new_game(games)
    first = await asyncio.wait_for(submit(game, place(0, "once")), 1)
    different_body = Place(seat=0, id="once", token=PerformanceToken("baroque"), space="lute")
    again = await asyncio.wait_for(submit(game, different_body), 1)
    assert again == first and game.version == 2
    assert len(await store.read(game.game_id)) == 2
    await games.close()


async def test_closing_answers_every_waiting_command_unavailable() -> None:
    store = Recorded()
    games = Games(store, command_timeout=5)
    game = await new_game(games)
    store.gated.add(game.game_id)
    answers = [submit(game, place(0, f"w-{n}")) for n in range(3)]
    await asyncio.wait_for(store.entered.wait(), 1)
    await games.close()
    for answered in answers:
        with pytest.raises(StoreUnavailable):
            await asyncio.wait_for(answered, 1)


async def test_a_round_decides_each_command_on_the_state_the_ones_before_it_leave() -> None:
    # The oracle: the same commands one at a time, each in a round of its own.
    script = [
        Place(seat=0, id="a", token=PerformanceToken("classical"), space="viola"),
        Place(seat=1, id="b", token=RepairToken("strings"), space="viola"),  # below Ada's chair
        Place(seat=1, id="c", token=PerformanceToken("classical"), space="viola"),  # steals by majority
        Place(seat=0, id="d", token=RepairToken("strings"), space="viola"),
    ]

    async def events_of(together: bool) -> list[Any]:
        store = MemoryEventStore()
        games = Games(store)
        game = await new_game(games)
        if together:
            await asyncio.wait_for(asyncio.gather(*(submit(game, command) for command in script)), 1)
        else:
            for command in script:
                await asyncio.wait_for(submit(game, command), 1)
        stored = [envelope.decode(r.data).event for r in await store.read(game.game_id)]
        await games.close()
        return stored[1:]

    together = await events_of(True)
    assert [type(event).__name__ for event in together] == [
        "ChairClaimed",
        "PlacedBelowLine",
        "ChairStolen",
        "PlacedBelowLine",
    ]
    assert together == await events_of(False)


async def test_a_round_whose_first_append_loses_a_race_writes_none_of_its_later_commands_on_sand() -> None:
    """Two commands of one round, the second decided on the state the first leaves. Another node appends
    one event before the round's append: the first gets a conflict, and the second's expected version is
    now the stream's. Written, it would record a decision on a state that never was (and a chain that
    skips the other node's envelope). Both are decided again instead; the stream verifies, and each node's
    state is a replay of it."""
    store = Recorded()
    here, there = Games(store), Games(store)
    game = await new_game(here, players=3)
    other = await there.get(game.game_id)
    assert other is not None
    store.gated.add(game.game_id)
    answers = [submit(game, place(0, "here-1")), submit(game, place(1, "here-2"))]
    await asyncio.wait_for(store.entered.wait(), 1)
    store.gated.clear()  # the other node's append goes straight through
    assert (await asyncio.wait_for(submit(other, place(2, "there-1")), 1)).version == 2
    store.release.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*answers), 2)
    assert [outcome.version for outcome in outcomes] == [3, 4]
    lines = [record.data for record in await store.read(game.game_id)]
    report = verify(lines, keys=Keyring([here.node.signer.public, there.node.signer.public]))
    assert report.ok, report.problem
    for node in (here, there):
        live = await node.get(game.game_id, refresh=True)
        assert live is not None and live.view == report.view
    await here.close()
    await there.close()


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda players: st.tuples(st.just(players), st.lists(commands(players), max_size=12))
    ),
    st.booleans(),
)
def test_a_round_decides_any_mix_of_commands_as_one_at_a_time_would(
    case: tuple[int, list[Place | TakeBack]], end: bool
) -> None:
    """The oracle: each command in a round of its own. Submitted together (one round), placements,
    take-backs and an end give the same answers and the same stored events."""
    players, drawn = case
    script: list[Place | TakeBack | EndGame] = [replace(c, id=f"c{i}") for i, c in enumerate(drawn)]
    if end:
        script.append(EndGame(seat=0, id="end"))

    async def played(together: bool) -> tuple[list[str], list[Any]]:
        store = MemoryEventStore()
        games = Games(store)
        game = await new_game(games, players)
        if together:
            answers = await asyncio.gather(*(submit(game, c) for c in script), return_exceptions=True)
        else:
            answers = []
            for command in script:
                answers += await asyncio.gather(submit(game, command), return_exceptions=True)
        stored = [envelope.decode(r.data).event for r in await store.read(game.game_id)]
        await games.close()
        kinds = [a.code if isinstance(a, Rejected) else type(a).__name__ for a in answers]
        return kinds, stored[1:]

    assert asyncio.run(played(True)) == asyncio.run(played(False))
