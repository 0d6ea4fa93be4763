"""Group commit: the commands waiting on this node are decided and appended in one round trip.

One task per node drains a queue of commands. Each round it decides every waiting command on its game's
cached state (several commands of one game in order, each on the state the previous one leaves), sends
all their appends to the store in one pipelined call, and then folds each game's accepted envelopes in
at once, so that the game's followers get one `events` frame for the round. Under light load a round is
one command, as before; under load one Redis round trip serves many commands and games.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from domain import Rejected, UnknownGame, decide, evolve
from domain.messages import EndGame, Place
from server.engine.envelope import Envelope, Record
from server.engine.live import LiveGame
from server.store import Appended, ConcurrencyConflict, StoreError, StoreUnavailable

if TYPE_CHECKING:
    from server.engine.service import GameService

log = logging.getLogger(__name__)


class Outcome(msgspec.Struct, frozen=True):
    """An accepted command: its last version and its envelopes as stored."""

    version: int
    envelopes: list[bytes]


# Called with a command's outcome as soon as the round has it, before the round's fan-out.
Answer = Callable[[Outcome], None]


class _Job:
    """One command waiting for its outcome."""

    __slots__ = ("game_id", "command", "key", "future", "answer", "attempts")

    def __init__(
        self, game_id: str, command: Place | EndGame, future: asyncio.Future[Outcome], answer: Answer | None
    ) -> None:
        self.game_id, self.command, self.future, self.answer = game_id, command, future, answer
        self.key = f"{command.seat}:{command.id}"
        self.attempts = 0


class _Planned:
    """A decided command: the version it expects, the envelopes to append, and the chain head after them."""

    __slots__ = ("job", "expected", "items", "data", "head")

    def __init__(self, job: _Job, expected: int, items: list[Envelope], data: list[bytes], head: str) -> None:
        self.job, self.expected, self.items, self.data, self.head = job, expected, items, data, head


class Committer:
    """Decides and appends the commands of every game on this node, a round at a time."""

    def __init__(self, service: GameService) -> None:
        self.service = service
        self._waiting: list[_Job] = []
        self._task: asyncio.Task[None] | None = None
        self.busy: set[str] = set()  # games with commands in the current round (never evicted meanwhile)
        self._round_end: asyncio.Future[None] | None = None  # done when the running round is over

    def submit(
        self, game_id: str, command: Place | EndGame, answer: Answer | None = None
    ) -> asyncio.Future[Outcome]:
        """Queue a command; the future gets its Outcome, or Rejected / StoreError.

        `answer`, when given, gets the Outcome first, in the round's own turn of the loop and before the
        round's fan-out (the sender's `accepted` then precedes its game's frame without waiting for the
        caller's task to wake); never when the future was already done (a caller that gave up).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        self._waiting.append(_Job(game_id, command, future, answer))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        return future

    async def close(self) -> None:
        """Stop the committer task (pending commands fail as unavailable)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for job in self._waiting:
            _fail(job, StoreUnavailable("the server is shutting down"))

    async def settled(self, game_id: str) -> None:
        """Return once the round running now, if it holds `game_id`, is over: the appends it had in
        flight are folded in, or have failed. (Not "until no round holds it": under steady load a busy
        game is in every round, and its tail would wait for ever.)"""
        if game_id in self.busy and self._round_end is not None:
            await asyncio.shield(self._round_end)

    async def _run(self) -> None:
        while self._waiting:
            jobs, self._waiting = self._waiting, []
            self._round_end = asyncio.get_running_loop().create_future()
            try:
                await self._round(jobs)
            except asyncio.CancelledError:
                for job in jobs:
                    _fail(job, StoreUnavailable("the server is shutting down"))
                raise
            except Exception as exc:  # a failure of the round answers every command in it, never hangs one
                if not isinstance(exc, StoreError):
                    log.exception("commit round failed")
                for job in jobs:
                    _fail(job, exc if isinstance(exc, StoreError) else StoreUnavailable(str(exc)))
            finally:
                self.busy.clear()
                self._round_end.set_result(None)
                self._round_end = None

    async def _round(self, jobs: list[_Job]) -> None:
        by_game: dict[str, list[_Job]] = {}
        for job in jobs:
            if not job.future.done():  # a caller that gave up (timeout) needs no answer
                by_game.setdefault(job.game_id, []).append(job)
        self.busy.update(by_game)
        planned: list[_Planned] = []
        rejected: list[tuple[_Job, Rejected]] = []
        for game_id, game_jobs in by_game.items():
            # A held game without a coroutine: `live` (a read) only for one this node does not hold yet.
            game = self.service.held(game_id) or await self.service.live(game_id)
            if game is None:
                for job in game_jobs:
                    _fail(job, UnknownGame("no such game"))
                continue
            self._plan(game, game_jobs, planned, rejected)
        results: list[Appended | StoreError] = []
        if planned:
            results = await self.service.store.append_many(
                [(p.job.game_id, p.expected, p.data, p.job.key) for p in planned]
            )
        if planned and self.service.failpoint == "exit_after_append":
            os._exit(3)  # a crash between the append and the broadcast, for reliability tests
        broken = await self._settle(planned, results)
        for job, exc in rejected:
            if job.game_id in broken:  # decided on a state whose commands did not all land: decide again
                self._retry(job)
            else:
                await self._answer_rejected(job, exc)

    def _plan(
        self, game: LiveGame, jobs: list[_Job], planned: list[_Planned], rejected: list[tuple[_Job, Rejected]]
    ) -> None:
        state, version, head = game.board.game, game.version, game.head
        last = jobs[-1]
        for job in jobs:
            try:
                events = decide(state, job.command)
            except Rejected as exc:
                rejected.append((job, exc))
                continue
            items, data, head = self.service.envelopes(
                game.game_id, version, head, job.command.id, job.command.seat, events
            )
            planned.append(_Planned(job, version, items, data, head))
            version += len(events)
            if job is not last:  # the next command of this game is decided on the state this one leaves
                for event in events:  # one or two events: evolve, not fold (which copies the whole state)
                    state = evolve(state, event)

    async def _settle(self, planned: list[_Planned], results: list[Appended | StoreError]) -> set[str]:
        """Answer each planned command; requeue those whose game moved under them."""
        accepted: dict[str, tuple[list[Record], list[Envelope]]] = {}
        heads: dict[str, str] = {}  # each game's chain head after its last accepted command
        broken: set[str] = set()  # games where a command failed: later ones in the round were planned on sand
        stale: set[str] = set()
        for plan, result in zip(planned, results, strict=True):
            job, game_id = plan.job, plan.job.game_id
            if game_id in broken:
                if isinstance(result, StoreError) and not isinstance(result, ConcurrencyConflict):
                    _fail(job, result)
                else:
                    self._retry(job)
                continue
            if isinstance(result, Appended) and not result.duplicate:
                records, items = accepted.setdefault(game_id, ([], []))
                records += [Record(item.version, d) for item, d in zip(plan.items, plan.data, strict=True)]
                items += plan.items
                heads[game_id] = plan.head
                _succeed(job, Outcome(result.last, plan.data))
                continue
            broken.add(game_id)
            if isinstance(result, Appended):  # a repeated id: the first answer, and a fresh look at the game
                stale.add(game_id)
                try:
                    _succeed(job, await self.service.replay(game_id, result))
                except StoreError as exc:
                    _fail(job, exc)
            elif isinstance(result, ConcurrencyConflict):
                stale.add(game_id)
                self._retry(job)
            else:
                _fail(job, result)
        for game_id, (records, items) in accepted.items():
            live = self.service.games.get(game_id)
            if live is not None:
                live.ingest(records, items, heads[game_id])  # one events frame per game per round
        for game_id in stale:
            live = self.service.games.get(game_id)
            if live is not None:
                with contextlib.suppress(StoreError):
                    await self.service.catch_up(live)
        return broken

    def _retry(self, job: _Job) -> None:
        job.attempts += 1
        if job.attempts > self.service.retries:
            _fail(
                job,
                StoreUnavailable(f"game {job.game_id}: too many concurrent writers, retry with the same id"),
            )
        else:
            self._waiting.append(job)

    async def _answer_rejected(self, job: _Job, exc: Rejected) -> None:
        # The id is checked before the command is decided: an accepted id keeps its first answer.
        try:
            prior = await self.service.store.outcome(job.game_id, job.key)
            if prior is None:
                _fail(job, exc)
            else:
                _succeed(job, await self.service.replay(job.game_id, prior))
        except StoreError as error:
            _fail(job, error)


def _succeed(job: _Job, outcome: Outcome) -> None:
    if not job.future.done():
        try:
            if job.answer is not None:
                job.answer(outcome)
        finally:  # whatever the answer did, the caller's future is never left hanging
            job.future.set_result(outcome)


def _fail(job: _Job, exc: BaseException) -> None:
    if not job.future.done():
        job.future.set_exception(exc)
