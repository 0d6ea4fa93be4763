"""A command the node cannot settle in time is answered `unavailable` at the command timeout, and a late
outcome changes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import msgspec

from server.engine.committer import Outcome
from server.metrics import Metrics
from server.protocol.frames import decode_frame
from server.web import ws


class _Outbox:
    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def put(self, data: bytes) -> None:
        self.frames.append(msgspec.json.decode(data))


class _StuckService:
    """A service whose commands are taken and never settled (a round waiting on its store)."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[Outcome]] = []
        self.answers: list[Callable[[Outcome], None]] = []

    def handle(
        self, game_id: str, command: object, answer: Callable[[Outcome], None]
    ) -> asyncio.Future[Outcome]:
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.answers.append(answer)
        return future

    def settle(self, outcome: Outcome) -> None:
        """What the committer's round does: the answer first, then the future."""
        self.answers[0](outcome)
        self.pending[0].set_result(outcome)


async def test_a_command_not_settled_in_time_is_answered_unavailable_at_the_timeout() -> None:
    service = _StuckService()
    ctx = SimpleNamespace(settings=SimpleNamespace(command_timeout=0.2), service=service, metrics=Metrics())
    game = SimpleNamespace(game_id="g1", version=7)
    frame = decode_frame(
        '{"type":"place","id":"c-1","token":{"kind":"performance","era":"baroque"},"space":"viola"}'
    )
    outbox = _Outbox()
    started = time.monotonic()
    await asyncio.wait_for(ws._command(ctx, game, frame, 0, outbox), 2)  # type: ignore[arg-type]
    elapsed = time.monotonic() - started
    assert 0.15 < elapsed < 1.0
    assert [(f["type"], f["id"], f["code"]) for f in outbox.frames] == [("rejected", "c-1", "unavailable")]
    # The round settling later finds its caller gone: nothing more is answered.
    (pending,) = service.pending
    assert pending.done()
    assert not pending.cancelled() and isinstance(pending.exception(), TimeoutError)
    await asyncio.sleep(0)
    assert len(outbox.frames) == 1


async def test_a_command_settled_in_time_is_accepted_and_its_timer_is_gone() -> None:
    service = _StuckService()
    ctx = SimpleNamespace(settings=SimpleNamespace(command_timeout=0.2), service=service, metrics=Metrics())
    game = SimpleNamespace(game_id="g1", version=7)
    frame = decode_frame('{"type":"end_game","id":"c-2"}')
    outbox = _Outbox()
    task = asyncio.ensure_future(ws._command(ctx, game, frame, 0, outbox))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    service.settle(Outcome(8, [b'{"version":8}']))
    # The answer is in the outbox at once, in the round's turn, before the command's task wakes.
    assert [(f["type"], f["id"], f["version"]) for f in outbox.frames] == [("accepted", "c-2", 8)]
    await asyncio.wait_for(task, 1)
    await asyncio.sleep(0.3)  # past the timeout: the timer was cancelled, nothing else is answered
    assert [(f["type"], f["id"], f["version"]) for f in outbox.frames] == [("accepted", "c-2", 8)]
