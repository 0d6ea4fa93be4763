"""A round no caller can spoil: a reply or a follower that raises, or whose caller has gone, changes no other
command's answer and stops neither the round's fold nor its fan-out."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from domain import Place, RepairToken
from server.engine.games import Games
from server.engine.owner import Follower, LiveGame, Outcome
from server.protocol import envelope
from server.store import Append, Appended, StoreError
from server.store.memory import MemoryEventStore


class Gated(MemoryEventStore):
    """A memory store whose appends wait at a gate once `closed`, so a test can act mid-round."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()
        self.calls = 0

    async def append_many(self, batch: Sequence[Append]) -> list[Appended | StoreError]:
        self.calls += 1
        if self.closed:
            self.entered.set()
            await self.opened.wait()
        return await super().append_many(batch)


class Collecting:
    """A follower's outbox that keeps the frames it is given."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def put(self, data: bytes) -> None:
        self.frames.append(msgspec.json.decode(data))

    def shut(self, code: int, reason: str) -> None:
        self.frames.append({"type": "closed", "code": code})

    def versions(self) -> list[int]:
        return [e["version"] for f in self.frames if f["type"] == "events" for e in f["envelopes"]]


class Raising(Collecting):
    """A follower's outbox that raises on every frame (its connection broke in a way nobody foresaw)."""

    def put(self, data: bytes) -> None:
        raise RuntimeError("this follower's socket is broken")


def place(seat: int, id: str) -> Place:
    return Place(seat=seat, id=id, token=RepairToken("winds"), space="oboe")


def follow(game: LiveGame, outbox: Collecting) -> None:
    game.follow(Follower(outbox))  # type: ignore[arg-type]


async def new_game(games: Games, players: int = 3) -> LiveGame:
    created = await games.create([f"P{n}" for n in range(players)])
    game = await games.get(created.game_id)
    assert game is not None
    return game


def submit(game: LiveGame, command: Place) -> asyncio.Future[Outcome | Exception]:
    """Submit; the future gets whatever the reply is given (set only while it still waits)."""
    answered: asyncio.Future[Outcome | Exception] = asyncio.get_running_loop().create_future()

    def reply(result: Outcome | Exception) -> None:
        if not answered.done():
            answered.set_result(result)

    game.submit(command, reply)
    return answered


def submit_raising(game: LiveGame, command: Place, got: list[Outcome | Exception]) -> None:
    """Submit with a reply that records what it was given, then raises."""

    def reply(result: Outcome | Exception) -> None:
        got.append(result)
        raise RuntimeError("this caller's reply failed")

    game.submit(command, reply)


async def stored_versions(store: MemoryEventStore, game: LiveGame) -> dict[str, int]:
    """Each stored command's id and its last version (the creation's aside)."""
    versions: dict[str, int] = {}
    for record in await store.read(game.game_id, 1):
        command_id = envelope.decode(record.data).command_id
        assert command_id is not None
        versions[command_id] = record.version
    return versions


@pytest.mark.parametrize("raising", [0, 1, 2])
@pytest.mark.logs_warnings
async def test_a_reply_that_raises_changes_no_other_answer_and_the_round_still_folds_and_fans_out(
    raising: int, caplog: pytest.LogCaptureFixture
) -> None:
    store = Gated()
    games = Games(store, command_timeout=5)
    game = await new_game(games)
    outbox = Collecting()
    follow(game, outbox)
    store.closed = True  # the three commands wait for one round together
    got: list[Outcome | Exception] = []
    answers: dict[int, asyncio.Future[Outcome | Exception]] = {}
    for seat in range(3):
        if seat == raising:
            submit_raising(game, place(seat, f"c-{seat}"), got)
        else:
            answers[seat] = submit(game, place(seat, f"c-{seat}"))
    await asyncio.wait_for(store.entered.wait(), 1)
    with caplog.at_level(logging.ERROR, logger="server.engine.owner"):
        store.opened.set()
        results = await asyncio.wait_for(asyncio.gather(*answers.values()), 2)

    # Every other command gets its true answer: the version the stream holds it at, and its envelopes.
    stored = await stored_versions(store, game)
    assert stored == {f"c-{seat}": 2 + seat for seat in range(3)}
    for seat, result in zip(answers, results, strict=True):
        assert isinstance(result, Outcome), result
        assert result.version == stored[f"c-{seat}"]
        assert result.envelopes == [r.data for r in await store.read(game.game_id, 1 + seat, 2 + seat)]
    # The raising caller was given its true answer too, once.
    assert len(got) == 1 and isinstance(got[0], Outcome) and got[0].version == 2 + raising
    # The round folded and fanned out all three, in one frame, and no catch-up read was needed for it.
    assert game.version == 4
    assert [[e["version"] for e in f["envelopes"]] for f in outbox.frames] == [[2, 3, 4]]
    assert store.calls == 1
    # The failure is logged once, naming the caller's command.
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1
    assert getattr(failures[0], "command_id", None) == f"c-{raising}"
    assert getattr(failures[0], "game_id", None) == game.game_id
    # The game goes on: the next round is answered and fanned out as usual.
    store.closed = False
    after = await asyncio.wait_for(submit(game, place(0, "next")), 1)
    assert isinstance(after, Outcome) and after.version == 5
    assert outbox.versions() == [2, 3, 4, 5]
    await games.close()


@pytest.mark.logs_warnings
async def test_a_reply_whose_caller_is_gone_changes_no_other_answer() -> None:
    """The websocket route's case: the caller awaited a future, its task was cancelled mid-command, and
    its reply then finds that future done."""
    store = Gated()
    games = Games(store, command_timeout=5)
    game = await new_game(games)
    outbox = Collecting()
    follow(game, outbox)
    store.closed = True
    gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    game.submit(place(0, "gone"), lambda result: gone.set_result(None))  # no check: raises once cancelled
    others = [submit(game, place(seat, f"c-{seat}")) for seat in (1, 2)]
    await asyncio.wait_for(store.entered.wait(), 1)
    gone.cancel()
    store.opened.set()
    results = await asyncio.wait_for(asyncio.gather(*others), 2)
    assert [r.version if isinstance(r, Outcome) else r for r in results] == [3, 4]
    assert outbox.versions() == [2, 3, 4] and game.version == 4
    await games.close()


async def test_a_cancelled_handle_changes_no_other_answer(caplog: pytest.LogCaptureFixture) -> None:
    """Games.handle's caller cancelled while its command is in flight: the others of its round are
    answered as the stream holds them, and the cancelled command's outcome lands nowhere (no error: a
    caller that stopped waiting is no failure)."""
    store = Gated()
    games = Games(store, command_timeout=5)
    game = await new_game(games)
    outbox = Collecting()
    follow(game, outbox)
    store.closed = True
    # Started in one turn of the loop, the three reach the game before its worker takes them: one round.
    cancelled = asyncio.ensure_future(games.handle(game.game_id, place(0, "cancelled")))
    others = [asyncio.ensure_future(games.handle(game.game_id, place(s, f"c-{s}"))) for s in (1, 2)]
    await asyncio.wait_for(store.entered.wait(), 1)
    cancelled.cancel()
    with caplog.at_level(logging.WARNING):
        store.opened.set()
        results = await asyncio.wait_for(asyncio.gather(*others), 2)
    assert [r.version for r in results] == [3, 4]
    assert outbox.versions() == [2, 3, 4] and game.version == 4
    assert cancelled.cancelled()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    await games.close()


@pytest.mark.logs_warnings
async def test_a_follower_that_raises_is_closed_and_the_others_still_get_every_frame(
    caplog: pytest.LogCaptureFixture,
) -> None:
    games = Games(MemoryEventStore())
    game = await new_game(games)
    before, broken, after = Collecting(), Raising(), Collecting()
    for outbox in (before, broken, after):
        follow(game, outbox)
    with caplog.at_level(logging.ERROR, logger="server.engine.owner"):
        first = await asyncio.wait_for(submit(game, place(0, "c-0")), 1)
        second = await asyncio.wait_for(submit(game, place(1, "c-1")), 1)
    assert isinstance(first, Outcome) and first.version == 2
    assert isinstance(second, Outcome) and second.version == 3
    assert before.versions() == after.versions() == [2, 3]
    # Closed (1013: the client comes back with `since`) and dropped, so it is logged once, not per round.
    assert broken.frames == [{"type": "closed", "code": 1013}]
    assert len(game.followers) == 2
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    await games.close()


@pytest.mark.logs_warnings
async def test_a_watcher_that_raises_stops_no_fan_out() -> None:
    games = Games(MemoryEventStore())
    game = await new_game(games)
    outbox = Collecting()
    follow(game, outbox)
    told: list[int] = []

    def watcher(watched: LiveGame) -> None:
        told.append(watched.version)
        raise RuntimeError("the wall failed")

    game.watch(watcher)
    first = await asyncio.wait_for(submit(game, place(0, "c-0")), 1)
    second = await asyncio.wait_for(submit(game, place(1, "c-1")), 1)
    assert [r.version if isinstance(r, Outcome) else r for r in (first, second)] == [2, 3]
    assert outbox.versions() == [2, 3]
    assert told == [2, 3]  # still told of each fold
    await games.close()
