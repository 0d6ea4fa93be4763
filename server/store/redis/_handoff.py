"""A store's own appends, handed to its own open tails of their games (standalone Redis).

Every append publishes a notice, and a tail woken by one reads the stream past what it delivered
(server.store.redis._notify). What this store object appends itself needs no such read: its bytes are
known once Redis answers. The adapter hands each of its appends to the open tails of that game on this
store; a woken tail first delivers what it was handed that follows what it delivered, and reads only
when a notice names a version beyond that.

A notice may come before the answer of the append it tells of (the subscriber has a connection of its
own): a tail with a notice beyond what it holds first waits for this store's appends of its game that
were in flight then, each bounded by the command timeout. Nothing depends on this for its correctness:
what is not handed (another node's append, an append whose caller gave up on it) is read, so a tail
never misses a version; a handed record it holds already is dropped, so none comes twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from server.store import Append, Appended, Record, StoreError


class Handed:
    """One tail's share of its store's appends to its game: records written, not yet delivered."""

    __slots__ = ("game", "records")

    def __init__(self, game: _Game) -> None:
        self.game = game
        self.records: list[Record] = []

    @property
    def in_flight(self) -> bool:
        """Whether this store has appends of the game in flight (sent, not yet answered)."""
        return self.game.answered < self.game.sent

    async def settled(self) -> None:
        """Until this store's appends of the game that are in flight now have been answered."""
        await self.game.answers(self.game.sent)

    def take(self, last: int) -> list[Record]:
        """The records handed that follow version `last` without a gap; those up to `last` are dropped."""
        records = self.records
        if not records:
            return []
        records.sort(key=_version)  # in order already but for appends answered out of order
        start = 0
        while start < len(records) and records[start].version <= last:
            start += 1
        end = start
        while end < len(records) and records[end].version == last + 1 + end - start:
            end += 1
        taken, self.records = records[start:end], records[end:]
        return taken


def _version(record: Record) -> int:
    return record.version


class _Game:
    """A game's open tails on this store, and its appends sent and answered (answered or given up on)."""

    __slots__ = ("game_id", "tails", "sent", "answered", "_answer")

    def __init__(self, game_id: str) -> None:
        self.game_id = game_id
        self.tails: list[Handed] = []
        self.sent = self.answered = 0
        self._answer: asyncio.Future[None] | None = None  # made when a tail waits: done at the next answer

    async def answers(self, count: int) -> None:
        """Until `count` appends of the game have been answered."""
        while self.answered < count:
            if self._answer is None:
                self._answer = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._answer)

    def answer(self) -> None:
        self.answered += 1
        if self._answer is not None:
            self._answer.set_result(None)
            self._answer = None


class Handoff:
    """The games this store tails, and what its own appends hand to their tails."""

    __slots__ = ("_games",)

    def __init__(self) -> None:
        self._games: dict[str, _Game] = {}

    def open(self, game_id: str) -> Handed:
        """A tail of `game_id` opens: what this store appends to the game from now on is handed to it."""
        game = self._games.get(game_id)
        if game is None:
            game = self._games[game_id] = _Game(game_id)
        handed = Handed(game)
        game.tails.append(handed)
        return handed

    def close(self, handed: Handed) -> None:
        """The tail closes: nothing more is handed to it."""
        game = handed.game
        if handed in game.tails:
            game.tails.remove(handed)
            if not game.tails and self._games.get(game.game_id) is game:
                del self._games[game.game_id]

    def sending(self, game_ids: Iterable[str]) -> list[_Game] | None:
        """An append call for `game_ids` is sent: the tailed ones among them (None: none), for `answered`."""
        games = self._games
        if not games:
            return None
        flight: list[_Game] = []
        for game_id in game_ids:
            game = games.get(game_id)
            if game is not None and game not in flight:
                game.sent += 1
                flight.append(game)
        return flight or None

    def answered(
        self, flight: list[_Game], batch: Sequence[Append], results: Sequence[Appended | StoreError] | None
    ) -> None:
        """The call `sending` told of is over: each written append's records go to its game's open tails
        (None: the caller gave up, nothing is handed), and the tails waiting for the call go on."""
        if results is not None:
            for item, result in zip(batch, results, strict=True):
                if not isinstance(result, Appended) or result.duplicate:
                    continue
                envelopes = item.envelopes
                if result.last - result.first + 1 != len(envelopes):
                    continue  # not what this call wrote: read instead
                for game in flight:
                    if game.game_id == item.game_id:
                        records = [Record(result.first + i, data) for i, data in enumerate(envelopes)]
                        for tail in game.tails:
                            tail.records += records
                        break
        for game in flight:
            game.answer()
