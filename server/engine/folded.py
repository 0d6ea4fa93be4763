"""A game folded in memory: its board (state and view), its chain head, and its view kept encoded.

Records are folded in version order, each once (`fold` skips what it has and refuses a gap, and a
stream that no longer holds what it folded), whether they come from this node's own appends or from the
stream. After each batch the view before it is kept, so that a view delta (what the batch changed)
costs the spaces it touched, not the game.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from domain import Event, Score
from projections import Board, PlayerView, View, apply, project, view_delta
from server.protocol import envelope
from server.protocol.envelope import GENESIS, Envelope
from server.store import Record, UnreadableGame

_encode = msgspec.json.Encoder().encode
# Up to this many new events are applied one by one (each touches one space); more are folded in one pass.
INCREMENTAL_UP_TO = 8
# Encoded spaces kept per game, in bytes (ORCHESTRA_VIEW_CACHE_BYTES): within the budget no space is
# encoded twice; past it, the spaces that do not fit are encoded again for each whole view sent.
SPACES_CACHE_BYTES = 32 * 1024


class _EncodedView(msgspec.Struct, frozen=True, gc=False):
    """The View's fields in its order, with each space already encoded."""

    game_id: str
    version: int
    ended: bool
    players: tuple[PlayerView, ...]
    spaces: dict[str, msgspec.Raw]
    scores: tuple[Score, ...]


class GapError(Exception):
    """Records arrived past a version this node has not seen: it must read the missing ones first."""


class Diverged(Exception):
    """The stream no longer holds what this node folded: the record at its version is another line, or
    the next record does not chain to it. Acknowledged appends were lost (a Redis failover, a crash
    before the disk had them) and others were written at their versions: the game must be read again
    from the start."""


class FoldedGame:
    """One game's state and view at its last folded version."""

    __slots__ = (
        "game_id",
        "board",
        "before",
        "chain_head",
        "last_bytes",
        "last_at",
        "_spaces_json",
        "_cached_bytes",
        "_budget",
    )

    def __init__(self, game_id: str, cache_bytes: int = SPACES_CACHE_BYTES) -> None:
        self.game_id = game_id
        self._budget = cache_bytes
        self.board = Board()
        self.before: View = self.board.view  # the view before the last batch folded in
        self.chain_head = GENESIS
        self.last_bytes: bytes | None = None  # the stored bytes of the last record folded in
        self.last_at = ""
        # Each space's encoded view, kept with the view object it encodes: an event touches one space, so
        # the others are not encoded again (a long game's spaces hold hundreds of tokens).
        self._spaces_json: dict[str, tuple[object, msgspec.Raw]] = {}
        self._cached_bytes = 0

    @property
    def version(self) -> int:
        """The last version folded in."""
        return self.board.version

    def empty(self) -> FoldedGame:
        """A game with nothing folded in yet, with this one's id and cache budget."""
        return FoldedGame(self.game_id, self._budget)

    @property
    def view_json(self) -> bytes:
        """The view at `version`, encoded (only the spaces changed since the last call are encoded again)."""
        return _encode(self.encoded_view())

    def encoded_view(self) -> msgspec.Struct:
        """The view at `version` as a struct of encoded spaces: a frame holding it encodes it in its own
        pass, one copy of a view that grows with the game, not two."""
        view = self.board.view
        cache = self._spaces_json
        spaces: dict[str, msgspec.Raw] = {}
        for space_id, space in view.spaces.items():
            cached = cache.get(space_id)
            spaces[space_id] = (
                cached[1] if cached is not None and cached[0] is space else self._space_json(space_id, space)
            )
        return _EncodedView(view.game_id, view.version, view.ended, view.players, spaces, view.scores)

    def delta(self) -> msgspec.Struct:
        """What the last batch changed in the view (protocol.md's `view_delta`)."""
        return view_delta(self.before, self.board.view)

    def _space_json(self, space_id: str, space: object) -> msgspec.Raw:
        cache = self._spaces_json
        cached = cache.get(space_id)
        if cached is not None and cached[0] is space:
            return cached[1]
        encoded = msgspec.Raw(_encode(space))
        if cached is not None:
            del cache[space_id]
            self._cached_bytes -= len(cached[1])
        if self._cached_bytes + len(encoded) <= self._budget:
            cache[space_id] = (space, encoded)
            self._cached_bytes += len(encoded)
        return encoded

    def fold(
        self,
        records: Sequence[Record],
        decoded: Sequence[Envelope] | None = None,
        chain_head: str | None = None,
    ) -> Sequence[Record]:
        """Fold in the records not seen yet (older ones are skipped); the records folded.

        `decoded` and `chain_head` (the chain hash of the last record), when the caller has them already,
        spare decoding and hashing again.

        Raises: GapError if a record skips a version; Diverged if the record at this game's version is
        not the one folded, or the first new one does not chain to it; UnreadableGame for an envelope
        that does not decode.
        """
        version = self.board.version
        skip = 0
        for record in records:
            if record.version > version:
                break
            skip += 1
        if skip and records[skip - 1].version == version and records[skip - 1].data != self.last_bytes:
            raise Diverged(f"{self.game_id}: the stream holds another line at version {version}")
        fresh = records[skip:] if skip else records
        if not fresh:
            return fresh
        # A load folds thousands of records: check the versions in one comparison, not one by one.
        if [r.version for r in fresh] != list(range(version + 1, version + 1 + len(fresh))):
            got = next(r.version for i, r in enumerate(fresh, version + 1) if r.version != i)
            raise GapError(f"{self.game_id}: got version {got} past version {version}")
        envelopes = decode_all(self.game_id, fresh) if decoded is None else decoded[skip:]
        # Checked only on top of something folded: a whole game read at once is the stream as it is, and
        # a chain broken inside it is for `orchestra verify` to report, not a reason to read it again.
        if version and envelopes[0].prev != self.chain_head:
            raise Diverged(f"{self.game_id}: version {version + 1} does not follow version {version}")
        events: list[Event] = [env.event for env in envelopes]
        self.before = self.board.view
        if len(events) > INCREMENTAL_UP_TO:
            board = project(events, self.board)  # a load or a catch-up: fold at once, render once
        else:
            board = self.board
            for event in events:
                board = apply(board, event)
        self.board, self.last_at = board, envelopes[-1].at
        self.last_bytes = fresh[-1].data
        self.chain_head = envelope.chain_hash(self.last_bytes) if chain_head is None else chain_head
        return fresh


def decode_all(game_id: str, records: Sequence[Record]) -> list[Envelope]:
    """The envelopes of stored records. Raises: UnreadableGame naming the first that does not decode."""
    envelopes: list[Envelope] = []
    for record in records:
        try:
            envelopes.append(envelope.decode(record.data))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UnreadableGame(game_id, record.version, str(exc)) from None
    return envelopes
