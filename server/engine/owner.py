"""One owner per live game: its folded state, its followers, and its appends, in one order.

A `LiveGame` is the only thing on this node that changes a game. Commands are submitted to it; its
worker (a task that runs while there is work, one per game) takes every command waiting, decides each on
the state the previous one leaves, appends them all in one store call, and then, in this order:

1. answers each accepted command (its sender's `accepted` is queued before anything else of the round),
2. folds the accepted envelopes into the game's state and view,
3. fans one frame per view mode out to every follower, encoded once for all,
4. does what needs another read: first outcomes of repeated ids, refusals whose id may have been
   accepted before, and a catch-up when another node moved the game.

What another node appends reaches the game through its tail (one per followed or watched game) and goes
through the same fold and fan-out, never while a round of this game is in flight. A watcher (the node's
wall, server.engine.wall) is told each time the game folds something new, before the fan-out; a game
nobody watches pays nothing for it. Nothing here waits on another game: each game's worker awaits only
its own store calls, which the store pipelines with other games'.

Should the stream no longer hold what the game folded (a Redis that lost acknowledged appends, with
others written at their versions since), the store refuses the game's appends (each names the line it
follows) and the fold refuses what does not chain to it: the game is read again from the start, and its
followers are closed with HISTORY_CHANGED, to come back to the game as the stream now holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import msgspec

from domain import Event, Game, Rejected, UnknownGame, decide, evolve
from domain.messages import CloseSeat, EndGame, Place, PlayAgain, ReissueToken, TakeBack, TakeSeat
from projections import View
from server import auth
from server.engine.envelope import seal
from server.engine.folded import Diverged, FoldedGame, GapError
from server.engine.notary import Notary
from server.engine.outbox import Outbox
from server.engine.signing import Signer
from server.metrics import Metrics
from server.protocol.codes import HISTORY_CHANGED, SEAT_CLOSED, TOKEN_REISSUED, TOO_SLOW
from server.protocol.envelope import Envelope
from server.protocol.frames import DeltaFrame, EventsFrame, HistoryFrame, LiveView, NextGameFrame, encode
from server.store import (
    Append,
    Appended,
    ConcurrencyConflict,
    EventStore,
    HistoryChanged,
    Record,
    StoreError,
    StoreUnavailable,
    UnreadableGame,
)

log = logging.getLogger(__name__)

Command = Place | EndGame | TakeBack | TakeSeat | CloseSeat | ReissueToken | PlayAgain


class Outcome(msgspec.Struct, frozen=True):
    """An accepted command: its last version and its envelopes as stored."""

    version: int
    envelopes: list[bytes]


class HistoryLost(Rejected):
    """A repeated id whose envelopes the stream no longer holds (dropped from the store): its first answer
    cannot be given again."""

    code = "history_lost"


# Gets a command's Outcome, or the Rejected or StoreError that refused it; called exactly once. Should it
# raise, the failure is its caller's alone: logged, and the round goes on (answers, fold, fan-out).
Reply = Callable[[Outcome | Exception], None]
# Told that the game folded new records (it reads what it needs from the game); must not block.
FoldWatcher = Callable[["LiveGame"], None]


class Submission:
    """A command waiting for its outcome, and where the outcome goes."""

    __slots__ = ("command", "key", "reply", "attempts", "answered", "timer", "game_id")

    def __init__(self, command: Command, reply: Reply, game_id: str = "") -> None:
        self.command, self.reply, self.game_id = command, reply, game_id
        self.key = f"{command.seat}:{command.id}"
        self.attempts = 0
        self.answered = False
        self.timer: asyncio.TimerHandle | None = None

    def answer(self, result: Outcome | Exception) -> None:
        """Reply, the first time only: a later outcome (after the deadline, say) changes nothing."""
        if not self.answered:
            self.answered = True
            if self.timer is not None:
                self.timer.cancel()
            try:
                self.reply(result)
            except Exception:
                # One caller's failure (a gone connection, a bug in its reply) is its own: raised into the
                # round, it would answer the others' written commands `unavailable` and skip the fold.
                command = self.command
                log.exception(
                    "a command's reply failed",
                    extra={"game_id": self.game_id, "seat": command.seat, "command_id": command.id},
                )

    def expire(self) -> None:
        """The deadline passed: `unavailable` (the command may still land; a retry with its id tells)."""
        self.answer(StoreUnavailable("no outcome within the command timeout"))


class Follower:
    """A connection following a game: its outbox, what its live frames carry of the view, and its seat and
    the token it came with (None for a public spectator): a reissue closes the seat's connections that
    came with another token, and a next game hands each its token there."""

    __slots__ = ("outbox", "view", "seat", "token", "digest")

    def __init__(
        self, outbox: Outbox, view: LiveView = "delta", seat: int | None = None, token: str | None = None
    ) -> None:
        self.outbox = outbox
        self.view = view
        self.seat = seat
        self.token = token
        self.digest = auth.digest(token) if token is not None else None


class _Plan:
    """A decided command: the version it expects and (once signed) the bytes stored there, its envelopes
    (their bodies, then once signed their stored lines), and the chain head after them."""

    __slots__ = ("submission", "expected", "after", "items", "data", "chain_head")

    def __init__(
        self, submission: Submission, expected: int, items: list[Envelope], data: list[bytes], chain_head: str
    ) -> None:
        self.submission, self.expected = submission, expected
        self.after: bytes | None = None
        self.items, self.data, self.chain_head = items, data, chain_head


class Node:
    """What every live game of a node shares: its store, clock, signing key, limits and metrics."""

    def __init__(
        self,
        store: EventStore,
        clock: Callable[[], str],
        metrics: Metrics,
        signer: Signer,
        *,
        retries: int = 20,
        command_timeout: float = 2.0,
        retry_delay: float = 0.5,
    ) -> None:
        self.store, self.clock, self.metrics, self.signer = store, clock, metrics, signer
        self.notary = Notary(signer, clock)
        self.retries, self.command_timeout, self.retry_delay = retries, command_timeout, retry_delay
        self._reported: set[tuple[str, int]] = set()

    def damaged(self, exc: UnreadableGame) -> None:
        """Count a read that found a damaged envelope; log it at error level once per game and version
        (a page or a client asking again and again must not flood the log)."""
        self.metrics.damaged.inc()
        if (exc.game_id, exc.version) not in self._reported:
            self._reported.add((exc.game_id, exc.version))
            log.error(
                "damaged game: a stored envelope cannot be read",
                extra={"game_id": exc.game_id, "version": exc.version, "error": exc.detail},
            )


class LiveGame:
    """One game on this node: decides, appends, answers, folds and fans out its commands."""

    def __init__(self, folded: FoldedGame, node: Node) -> None:
        self.game_id = folded.game_id
        self.folded = folded
        self._node = node
        self.followers: list[Follower] = []
        self.watcher: FoldWatcher | None = None
        self._waiting: list[Submission] = []
        self._worker: asyncio.Task[None] | None = None
        self._due = False  # a command woke the worker and its round has not sealed yet (the notary waits)
        self._news: list[Record] = []  # from the tail while a round was in flight
        self._behind = False  # the stream holds versions this node has not folded
        self._diverged = False  # the stream no longer holds what this node folded: read it all again
        self._tail_task: asyncio.Task[None] | None = None
        self._refreshing: asyncio.Future[bool] | None = None  # a read in flight that callers share
        # Written once, at creation: read once, by the first caller, and shared with those that ask meanwhile.
        self._credentials: asyncio.Future[dict[str, str]] | None = None
        self.gone = False  # the stream was deleted (archived)
        self.damage: UnreadableGame | None = None  # the stream holds an envelope that cannot be read
        self._seats_seen = self._seats_now()  # what of the seats the followers were last told

    @property
    def version(self) -> int:
        """The last version folded in."""
        return self.folded.version

    @property
    def state(self) -> Game:
        """The game's domain state as of the last version folded in."""
        return self.folded.board.game

    @property
    def view(self) -> View:
        """The game's view (hidden information stripped), of the same version as its state."""
        return self.folded.board.view

    @property
    def view_json(self) -> bytes:
        """The view, encoded (once per batch folded)."""
        return self.folded.view_json

    @property
    def players(self) -> tuple[str | None, ...]:
        """The players' names by seat (None: an open seat)."""
        return self.folded.board.game.players

    @property
    def spectators(self) -> str:
        """Who may watch: "public" (anyone) or "token" (those with its watch token)."""
        return self.folded.board.game.spectators

    @property
    def ended(self) -> bool:
        """Whether the game has ended."""
        return self.folded.board.game.ended

    @property
    def next_game(self) -> str | None:
        """The game that follows this ended one, once a player asked for it."""
        return self.folded.board.game.next_game

    @property
    def last_at(self) -> str:
        """When the last envelope folded in was written (ISO 8601, UTC; "" before any)."""
        return self.folded.last_at

    @property
    def busy(self) -> bool:
        """Whether commands are waiting or in flight, or anyone follows or watches the game (never evicted
        then)."""
        return self._worker is not None or bool(self.followers) or self.watcher is not None

    # Commands ---------------------------------------------------------------------------------------

    def submit(self, command: Command, reply: Reply) -> Submission:
        """Queue a command; `reply` gets its Outcome, or the Rejected or StoreError that refused it, by the
        command timeout at the latest."""
        submission = Submission(command, reply, self.game_id)
        if self.gone:
            submission.answer(UnknownGame("no such game"))
            return submission
        if self.damage is not None:
            submission.answer(self.damage)
            return submission
        loop = asyncio.get_running_loop()
        # A timer, not asyncio.timeout: no task or context manager per command.
        submission.timer = loop.call_later(self._node.command_timeout, submission.expire)
        self._waiting.append(submission)
        if self._worker is None:
            # Its round is due in the next turn: the notary signs the turn's rounds together.
            self._node.notary.expect()
            self._due = True
            self._worker = loop.create_task(self._work())
        return submission

    async def _work(self) -> None:
        try:
            while self._waiting or self._behind or self._news or self._diverged:
                if self._diverged:  # found by the store or the fold: one whole read, no catch-up first
                    await self._read_again()
                if self._behind:
                    await self._catch_up()
                if self._news:
                    news, self._news = self._news, []
                    self._take(news)
                if self._waiting and not self._diverged:
                    batch, self._waiting = self._waiting, []
                    await self._round_guarded(batch)
        finally:
            self._worker = None
            if self._due:  # ended before its round sealed (a read first that failed, a cancel)
                self._due = False
                self._node.notary.arrived()

    async def _round_guarded(self, batch: list[Submission]) -> None:
        try:
            await self._round(batch)
        except asyncio.CancelledError:
            for submission in batch:
                submission.answer(StoreUnavailable("the server is shutting down"))
            raise
        except Exception as exc:  # a failed round answers every command in it, never leaves one hanging
            if not isinstance(exc, StoreError):
                log.exception("commit round failed", extra={"game_id": self.game_id})
            error = exc if isinstance(exc, StoreError) else StoreUnavailable(str(exc))
            for submission in batch:
                submission.answer(error)
            self._behind = True

    async def _round(self, batch: list[Submission]) -> None:
        plans, refused = self._decide([s for s in batch if not s.answered])
        arriving, self._due = self._due, False
        await self._signed(plans, arriving)
        results = await self._append(plans)

        accepted: list[_Plan] = []
        repeated: list[tuple[Submission, Appended]] = []
        again: list[Submission] = []
        failed = False  # a command of the round did not land: the later ones were decided on sand
        for plan, result in zip(plans, results, strict=True):
            submission = plan.submission
            if failed:
                if isinstance(result, StoreError) and not isinstance(result, ConcurrencyConflict):
                    submission.answer(result)
                else:
                    again.append(submission)
            elif isinstance(result, Appended) and not result.duplicate:
                accepted.append(plan)
            else:
                failed = True
                self._behind = True
                if isinstance(result, HistoryChanged):
                    self._diverged = True
                if isinstance(result, Appended):  # an id accepted before: its first answer
                    repeated.append((submission, result))
                elif isinstance(result, ConcurrencyConflict):
                    again.append(submission)
                else:
                    submission.answer(result)

        for plan in accepted:  # 1. answers
            plan.submission.answer(Outcome(plan.items[-1].version, plan.data))
        ended = False
        if accepted:  # 2. fold, 3. fan out
            ended = not self.ended
            records = [
                Record(item.version, data)
                for p in accepted
                for item, data in zip(p.items, p.data, strict=True)
            ]
            self._publish(
                self.folded.fold(
                    records, [item for p in accepted for item in p.items], accepted[-1].chain_head
                )
            )
            ended = ended and self.ended

        # 4. what needs another read, after the round's frame is out.
        if ended:
            await self._count_ended()
        for submission, first in repeated:
            await self._answer_from_store(submission, first)
        for submission, exc in refused:
            if failed:
                again.append(submission)
            else:
                # The id is checked before the command is decided: an accepted id keeps its first answer.
                try:
                    prior = await self._node.store.outcome(self.game_id, submission.key)
                except StoreError as error:
                    submission.answer(error)
                    continue
                if prior is None:
                    submission.answer(exc)
                else:
                    await self._answer_from_store(submission, prior)
        self._retry(again)

    def _decide(self, batch: list[Submission]) -> tuple[list[_Plan], list[tuple[Submission, Rejected]]]:
        """Decide each command on the state the ones before it leave; each accepted one's envelopes sealed
        (their bodies, signed by `_signed`)."""
        folded = self.folded
        state, version, chain_head = folded.board.game, folded.version, folded.chain_head
        at, key = self._node.clock(), self._node.notary.signer.key_id
        plans: list[_Plan] = []
        refused: list[tuple[Submission, Rejected]] = []
        accepted: Sequence[Event] = ()  # the last accepted command's events, not yet in `state`
        for submission in batch:
            # Only a command that follows needs the state they leave (the fold makes the game's own): one
            # or two events, evolved, not folded (a fold copies the whole state).
            for event in accepted:
                state = evolve(state, event)
            accepted = ()
            command = submission.command
            try:
                events = decide(state, command)
            except Rejected as exc:
                refused.append((submission, exc))
                continue
            items, bodies, chain_head = seal(
                self.game_id, version, chain_head, at, command.id, command.seat, events, key
            )
            plans.append(_Plan(submission, version, items, bodies, chain_head))
            version += len(events)
            accepted = events
        return plans, refused

    async def _signed(self, plans: list[_Plan], arriving: bool) -> None:
        """Sign the plans' bodies in this loop turn's batch: each plan gets its stored lines, and the
        bytes the stream must end with before it (the plan before's last line). `arriving`: the round
        was due (a command woke the worker)."""
        notary = self._node.notary
        if not plans:
            if arriving:
                notary.arrived()
            return
        after, start = self.folded.last_bytes, 0  # read before the wait: as the plans were decided on
        lines = await notary.sign([body for p in plans for body in p.data], arriving=arriving)
        for plan in plans:
            plan.after = after
            plan.data = lines[start : start + len(plan.data)]
            start += len(plan.data)
            after = plan.data[-1]

    async def _append(self, plans: list[_Plan]) -> list[Appended | StoreError]:
        """Append the plans in one store call; each gets its own result."""
        if not plans:
            return []
        # One plan or many: the store picks its cheapest call for the batch.
        batch = [Append(self.game_id, p.expected, p.data, p.submission.key, p.after) for p in plans]
        return await self._node.store.append_many(batch)

    async def _count_ended(self) -> None:
        """Tell the store the game has ended, so that it no longer counts as live (against the cap on
        live games). Should that fail, the game stays counted until it is archived: logged, not raised."""
        try:
            await self._node.store.ended(self.game_id)
        except StoreError as exc:
            log.warning("ended game still counted live", extra={"game_id": self.game_id, "error": str(exc)})

    async def _answer_from_store(self, submission: Submission, prior: Appended) -> None:
        """The answer an accepted command got, read back from the store."""
        try:
            records = await self._node.store.read(self.game_id, prior.first - 1, prior.last)
        except StoreError as exc:
            submission.answer(exc)
            return
        if [r.version for r in records] != list(range(prior.first, prior.last + 1)):
            # Trimmed or deleted by hand: an `accepted` now would name versions no read can give.
            span = f"{prior.first}" if prior.first == prior.last else f"{prior.first} to {prior.last}"
            message = f"this id was accepted as version {span}, which the game's stream no longer holds"
            submission.answer(HistoryLost(message))
            return
        submission.answer(Outcome(prior.last, [r.data for r in records]))

    def _retry(self, again: list[Submission]) -> None:
        """Put commands to decide again at the front of the queue, in their order, up to the retry limit."""
        keep: list[Submission] = []
        for submission in again:
            submission.attempts += 1
            if self.damage is not None:
                submission.answer(self.damage)
            elif submission.attempts > self._node.retries:
                message = f"game {self.game_id}: too many concurrent writers, retry with the same id"
                submission.answer(StoreUnavailable(message))
            else:
                keep.append(submission)
        self._waiting[:0] = keep

    # Folding what the stream holds ------------------------------------------------------------------

    async def credentials(self) -> dict[str, str]:
        """The game's credential hashes (seat, watch and host tokens): those written at its creation, read
        once (they never change), with each reissued seat's hash from the game's events over them (what
        this node folded: a caller that must not miss a reissue refreshes the game first).

        Callers that ask while the read is in flight share it: a game's players greeting it at once cost
        one read, not one each. A failed read is tried again by the next caller. Raises: StoreUnavailable.
        """
        if self._credentials is None:
            self._credentials = asyncio.ensure_future(self._node.store.credentials(self.game_id))
            self._credentials.add_done_callback(self._credentials_read)
        stored = await asyncio.shield(self._credentials)
        reissued = self.state.reissued
        if not reissued:
            return stored
        return {**stored, **{auth.seat_key(seat): credential for seat, credential in reissued.items()}}

    def _credentials_read(self, done: asyncio.Future[dict[str, str]]) -> None:
        if done.cancelled() or done.exception() is not None:
            self._credentials = None

    async def refresh(self) -> bool:
        """Fold in what the stream holds past this node's version; False when the stream is gone.

        Callers that ask while a refresh is in flight share its read: a burst of hellos for one game
        costs one read, not one each (what lands after that read reaches them live, as every append
        does). Raises: StoreUnavailable, UnreadableGame.
        """
        if self._refreshing is None:
            self._refreshing = asyncio.ensure_future(self._refresh())
            self._refreshing.add_done_callback(self._refreshed)
        return await asyncio.shield(self._refreshing)

    def _refreshed(self, done: asyncio.Future[bool]) -> None:
        self._refreshing = None
        if not done.cancelled():
            done.exception()  # retrieved: every caller that shared it got it already

    async def _refresh(self) -> bool:
        # Reading from the last known version itself (not after it) tells a quiet game from a deleted one.
        records = await self._node.store.read(self.game_id, max(0, self.version - 1))
        if not records and self.version > 0:
            if await self._node.store.version(self.game_id) == 0:
                self.gone = True
                return False
            return await self._diverged_from()  # the stream is behind what this node folded
        if self._worker is not None:
            self._news += records  # folded by the worker once its round is over
            return True
        try:
            self._take(records, strict=True)
        except Diverged:
            return await self._diverged_from()
        return True

    async def _diverged_from(self) -> bool:
        """The stream no longer holds what this node folded: read the game again now, or have the worker
        do it once its round is over (a round's fold must not meet another game state)."""
        if self._worker is not None:
            self._diverged = True
            return True
        return await self._reload()

    async def _catch_up(self) -> None:
        self._behind = False
        try:
            if not await self.refresh():
                for submission in self._waiting:
                    submission.answer(UnknownGame("no such game"))
                self._waiting = []
        except UnreadableGame as exc:
            self._node.damaged(exc)
            for submission in self._waiting:
                submission.answer(exc)
            self._waiting = []
        except StoreError:
            # Decided on what this node holds, a command gets a conflict and another catch-up.
            self._node.metrics.redis_errors.inc()

    def _take(self, records: Sequence[Record], strict: bool = False) -> None:
        """Fold records from the stream and fan out the new ones; a gap makes the worker read first, and
        a stream that went another way makes it read the whole game again (strict: raises Diverged)."""
        try:
            fresh = self.folded.fold(records)
        except GapError:
            self._behind = True
            self._start_worker()
            return
        except Diverged:
            if strict:
                raise
            self._diverged = True
            self._start_worker()
            return
        except UnreadableGame as exc:
            if strict:
                raise
            self._node.damaged(exc)
            self.damage = exc
            for submission in self._waiting:
                submission.answer(exc)
            self._waiting = []
            return
        if fresh:
            self._publish(fresh)
            self._observe_lag()

    def _start_worker(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._work())

    async def _reload(self) -> bool:
        """Read the whole game again and close every follower (HISTORY_CHANGED), which comes back to the
        game as the stream now holds it; False when the stream is gone.

        Raises: StoreUnavailable, UnreadableGame.
        """
        self._diverged = self._behind = False  # the whole stream is read: nothing to catch up on
        records = await self._node.store.read(self.game_id)
        if not records:
            self.gone = True
            return False
        folded = self.folded.empty()
        folded.fold(records)
        log.warning(
            "the stream no longer holds what this node folded: game read again",
            extra={"game_id": self.game_id, "version": self.version, "stream_version": folded.version},
        )
        self.folded = folded
        self._seats_seen = self._seats_now()  # its followers are closed below: nothing to tell them
        self._node.metrics.history_changed.inc()
        reason = f"the game's history changed (the store lost writes); reconnect: version {folded.version}"
        for follower in self.followers:
            follower.outbox.shut(HISTORY_CHANGED, reason)
        if self.watcher is not None:
            self.watcher(self)
        return True

    async def _read_again(self) -> None:
        """The worker's `_reload`: commands waiting are decided on what it reads, or answered with why it
        could not read."""
        try:
            if await self._reload():
                return
            error: Exception = UnknownGame("no such game")
        except UnreadableGame as exc:
            self._node.damaged(exc)
            self.damage = error = exc
        except StoreError as exc:
            self._node.metrics.redis_errors.inc()
            self._behind = True  # read again by the next catch-up, which finds the stream changed again
            error = exc
        for submission in self._waiting:
            submission.answer(error)
        self._waiting = []

    # Followers and fan-out --------------------------------------------------------------------------

    def follow(self, follower: Follower) -> None:
        """Send the follower every frame from the current version on (and the next game, when this ended
        one has it); the game's tail runs while followed."""
        self.followers.append(follower)
        self._keep_tail()
        next_id = self.next_game
        if next_id is not None:
            follower.outbox.put(encode(NextGameFrame(next_id, follower.token)))

    def unfollow(self, follower: Follower) -> None:
        """Stop sending to the follower; the tail stops with the last one (and no watcher)."""
        with contextlib.suppress(ValueError):
            self.followers.remove(follower)
        self._keep_tail()

    def watch(self, watcher: FoldWatcher) -> None:
        """Call `watcher` each time the game folds new records (its own appends and other nodes'); the
        game's tail runs while watched. One watcher at a time: a second replaces the first."""
        self.watcher = watcher
        self._keep_tail()

    def unwatch(self) -> None:
        """Stop calling the watcher; the tail stops unless the game is followed."""
        self.watcher = None
        self._keep_tail()

    def _keep_tail(self) -> None:
        """Run the tail while anyone follows or watches the game, and only then."""
        wanted = bool(self.followers) or self.watcher is not None
        if wanted and self._tail_task is None:
            self._tail_task = asyncio.get_running_loop().create_task(self._follow_stream())
        elif not wanted and self._tail_task is not None:
            self._tail_task.cancel()
            self._tail_task = None

    @property
    def tail_alive(self) -> bool:
        """Whether the game's tail runs (when it should)."""
        return self._tail_task is None or not self._tail_task.done()

    def _publish(self, records: Sequence[Record]) -> None:
        """Tell the watcher; then one frame per view mode for the records just folded, encoded once, to
        every follower."""
        watcher = self.watcher
        if watcher is not None:
            try:
                watcher(self)
            except Exception:  # the watcher's own failure: the followers still get their frame
                log.exception("the game's watcher failed", extra={"game_id": self.game_id})
        followers = self.followers
        if not followers:
            self._seats_seen = self._seats_now()
            return
        envelopes = [msgspec.Raw(r.data) for r in records]
        frames: dict[LiveView, bytes] = {}
        broken: list[Follower] = []
        for follower in followers:
            frame = frames.get(follower.view)
            if frame is None:
                frame = frames[follower.view] = self._frame(follower.view, envelopes)
            try:
                follower.outbox.put(frame)
            except Exception:
                log.exception("a follower failed: closed", extra={"game_id": self.game_id})
                broken.append(follower)
        for follower in broken:
            self._drop(follower)
        self._seats_changed()

    def _seats_now(self) -> tuple[object, tuple[int, ...], str | None]:
        game = self.state
        return game.reissued, game.closed, game.next_game

    def _seats_changed(self) -> None:
        """Tell the followers what the records just folded did to the seats: a reissued seat's connections
        that came with another token are closed (TOKEN_REISSUED), a closed seat's (SEAT_CLOSED), and a
        next game goes to every follower with its token there. Compared with what was last told, so it
        holds however the records came (this node's round, the tail, a catch-up)."""
        now = self._seats_now()
        if now == self._seats_seen:
            return
        _, closed_before, next_before = self._seats_seen
        self._seats_seen = now
        game = self.state
        shut: list[tuple[Follower, int, str]] = []
        for follower in self.followers:
            seat = follower.seat
            if seat is None:
                continue
            if seat in game.closed and seat not in closed_before:
                shut.append((follower, SEAT_CLOSED, f"the host closed seat {seat}: it takes no part"))
            elif seat in game.reissued and follower.digest != game.reissued[seat]:
                reason = f"the host gave seat {seat} a new token: this link no longer plays it"
                shut.append((follower, TOKEN_REISSUED, reason))
        for follower, code, reason in shut:
            self.unfollow(follower)
            try:
                follower.outbox.shut(code, reason)
            except Exception:  # its connection ends when its task does
                log.exception("a follower could not be closed", extra={"game_id": self.game_id})
        if game.next_game is not None and next_before is None:
            for follower in list(self.followers):
                try:
                    follower.outbox.put(encode(NextGameFrame(game.next_game, follower.token)))
                except Exception:
                    log.exception("a follower failed: closed", extra={"game_id": self.game_id})
                    self._drop(follower)

    def _drop(self, follower: Follower) -> None:
        """Stop following for a follower that failed, and close its connection: it missed a frame, so it
        must come back with `since` (1013, as a client too slow to read) rather than stay open with a gap."""
        self.unfollow(follower)
        try:
            follower.outbox.shut(TOO_SLOW, "a frame could not be sent; reconnect with since")
        except Exception:  # nothing more to do for it: its connection ends when its task does
            log.exception("a failed follower could not be closed", extra={"game_id": self.game_id})

    def _frame(self, view: LiveView, envelopes: list[msgspec.Raw]) -> bytes:
        if view == "delta":
            return encode(DeltaFrame(envelopes, self.folded.delta()))
        if view == "full":
            return encode(EventsFrame(envelopes, self.folded.encoded_view()))
        return encode(HistoryFrame(envelopes))

    async def _follow_stream(self) -> None:
        """Hand what other nodes append to the fold, for as long as the game is followed."""
        node = self._node
        while True:
            # Its batches hold this node's own appends too: the fold skips what it holds already.
            stream = node.store.tail(self.game_id, self.version)
            try:
                async for records in stream:
                    if self._worker is not None:
                        self._news += records
                    else:
                        self._take(records)
            except asyncio.CancelledError:
                raise
            except StoreError as exc:
                node.metrics.redis_errors.inc()
                log.warning("tail interrupted, retrying", extra={"game_id": self.game_id, "error": str(exc)})
                await asyncio.sleep(node.retry_delay)
            except Exception:
                log.exception("tail failed, retrying", extra={"game_id": self.game_id})
                await asyncio.sleep(node.retry_delay)
            finally:
                with contextlib.suppress(Exception):
                    await stream.aclose()

    def _observe_lag(self) -> None:
        with contextlib.suppress(ValueError):
            written = datetime.fromisoformat(self.folded.last_at.replace("Z", "+00:00"))
            self._node.metrics.tail_lag.set(max(0.0, (datetime.now(UTC) - written).total_seconds()))

    async def close(self) -> None:
        """Stop the tail and the worker; commands still waiting are answered unavailable."""
        tasks = [task for task in (self._tail_task, self._worker) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tail_task = None
        for submission in self._waiting:
            submission.answer(StoreUnavailable("the server is shutting down"))
        self._waiting = []
