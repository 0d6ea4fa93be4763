"""A stream that no longer holds what a node folded: the store lost the node's last acknowledged appends
(a Redis failing over to a replica that had not received them) and another node wrote other events at
their versions. The node must neither write after a line the stream no longer holds (a broken chain) nor
go on folding on top of it: it reads the game again and closes its followers, who come back to the game
as the stream holds it."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from domain import Place, RepairToken
from server.engine.games import Games
from server.engine.owner import Follower, LiveGame, Outcome
from server.engine.signing import Keyring
from server.ops.verify import Report, verify
from server.protocol import envelope
from server.protocol.codes import HISTORY_CHANGED
from server.store.memory import MemoryEventStore
from tests.support.waiting import until

# Each test loses a node's line on purpose: the node says so in its log, at warning.
pytestmark = pytest.mark.logs_warnings


class Forgetful(MemoryEventStore):
    """A memory store that can lose a game's last appends, with their command records, as a Redis that
    fails over to a replica they had not reached does."""

    def lose(self, game_id: str, keep: int) -> None:
        game = self._games[game_id]
        del game.envelopes[keep:]
        game.commands = {key: done for key, done in game.commands.items() if done.last <= keep}


class Closable:
    """A follower's outbox that keeps its frames and how it was closed."""

    def __init__(self) -> None:
        self.frames: list[dict[str, object]] = []
        self.closed_with: tuple[int, str] | None = None

    def put(self, data: bytes) -> None:
        if self.closed_with is None:
            self.frames.append(msgspec.json.decode(data))

    def shut(self, code: int, reason: str) -> None:
        self.closed_with = (code, reason)


def place(seat: int, id: str) -> Place:
    return Place(seat=seat, id=id, token=RepairToken("winds"), space="oboe")


async def lost_and_rewritten(store: Forgetful, *, follow: bool) -> tuple[Games, Games, LiveGame, Closable]:
    """Node `here` folds versions 2 and 3 of its own; the store loses 3; node `there`, reading the game
    now, writes another version 3. Returns both nodes, here's game, and the outbox following it."""
    here, there = Games(store), Games(store)
    game_id = (await here.create(["Ada", "Ben", "Cy"])).game_id
    game = await here.get(game_id)
    assert game is not None
    outbox = Closable()
    if follow:
        game.follow(Follower(outbox))  # type: ignore[arg-type]
    await asyncio.wait_for(here.handle(game_id, place(0, "kept")), 1)
    await asyncio.wait_for(here.handle(game_id, place(1, "lost")), 1)
    store.lose(game_id, 2)
    assert (await asyncio.wait_for(there.handle(game_id, place(2, "there")), 1)).version == 3
    assert game.version == 3  # still the lost line: nothing has told it yet
    return here, there, game, outbox


async def checked(store: Forgetful, here: Games, there: Games, game: LiveGame) -> Report:
    """The stream verifies (one unbroken chain), and here's state is a replay of it."""
    lines = [record.data for record in await store.read(game.game_id)]
    report = verify(lines, keys=Keyring([here.node.signer.public, there.node.signer.public]))
    assert report.ok, report.problem
    assert game.view == report.view
    assert game.folded.chain_head == envelope.chain_hash(lines[-1])
    return report


async def test_a_command_decided_after_a_lost_line_is_refused_then_decided_again_on_the_stream() -> None:
    store = Forgetful()
    here, there, game, outbox = await lost_and_rewritten(store, follow=True)
    outcome: Outcome = await asyncio.wait_for(here.handle(game.game_id, place(2, "after")), 2)
    assert outcome.version == 4
    report = await checked(store, here, there, game)
    assert report.envelopes == 4
    assert outbox.closed_with is not None and outbox.closed_with[0] == HISTORY_CHANGED
    assert await store.outcome(game.game_id, "1:lost") is None
    await here.close()
    await there.close()


async def test_a_tail_record_that_does_not_chain_to_the_line_held_makes_the_game_read_again() -> None:
    store = Forgetful()
    here, there, game, outbox = await lost_and_rewritten(store, follow=True)
    # Past the version here holds: its tail delivers it, chained to there's version 3, not here's.
    assert (await asyncio.wait_for(there.handle(game.game_id, place(0, "there-2")), 1)).version == 4
    await until(lambda: outbox.closed_with is not None and game.version == 4, 2, "the game read again")
    assert outbox.closed_with is not None and outbox.closed_with[0] == HISTORY_CHANGED
    # Nothing past the lost line was sent on top of it.
    sent = [e["version"] for f in outbox.frames for e in f["envelopes"]]  # type: ignore[attr-defined]
    assert sent == [2, 3]
    await checked(store, here, there, game)
    await here.close()
    await there.close()


async def test_a_refresh_that_finds_another_line_at_the_version_held_reads_the_game_again() -> None:
    store = Forgetful()
    here, there, game, _ = await lost_and_rewritten(store, follow=False)
    assert await asyncio.wait_for(game.refresh(), 1) is True  # what a hello does first
    assert game.version == 3
    await checked(store, here, there, game)
    await here.close()
    await there.close()


async def test_a_stream_that_lost_every_line_past_the_first_reads_back_as_the_game_it_holds() -> None:
    store = Forgetful()
    here, there = Games(store), Games(store)
    game_id = (await here.create(["Ada", "Ben"])).game_id
    game = await here.get(game_id)
    assert game is not None
    await asyncio.wait_for(here.handle(game_id, place(0, "lost")), 1)
    store.lose(game_id, 1)
    # Nothing written since: the version held is past the stream's. A command is decided again on it.
    assert (await asyncio.wait_for(here.handle(game_id, place(1, "next")), 2)).version == 2
    await checked(store, here, there, game)
    await here.close()
    await there.close()
