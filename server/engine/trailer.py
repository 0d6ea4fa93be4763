"""The signed trailer of an export: the game, its last version and that envelope's hash, when exported.

A trailer is the last line of an export (`GET /games/{id}/events?trailer=true`, `orchestra export`): a
file that lost envelopes at its end no longer matches its trailer, and one that lost the trailer too
has neither it nor (unless the game had ended) a signed end, which `verify` reports.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from domain import GameEnded
from server.engine import envelope
from server.engine.envelope import Record
from server.engine.signing import TRAILER, Signer

# How a trailer line begins; no envelope begins so (an envelope's first field is game_id).
TRAILER_START = b'{"type":"trailer"'


class Trailer(msgspec.Struct, frozen=True, tag="trailer", tag_field="type"):
    """What an export held when it was made, signed like an envelope (`key`, `sig` last)."""

    game_id: str
    version: int
    head: str  # the chain hash (SHA-256, hex) of the envelope at `version`
    ended: bool  # whether that envelope is the game's GameEnded
    at: str
    key: str | None = None
    sig: str | None = None


decode_trailer = msgspec.json.Decoder(Trailer).decode
_encode = msgspec.json.Encoder().encode


def trailer_line(game_id: str, records: Sequence[Record], at: str, signer: Signer) -> bytes:
    """The signed trailer of an export ending with `records`' last (a whole game's: never empty)."""
    last = records[-1]
    ended = isinstance(envelope.decode(last.data).event, GameEnded)
    unsigned = Trailer(game_id, last.version, envelope.chain_hash(last.data), ended, at, key=signer.key_id)
    return signer.sign(TRAILER, _encode(unsigned))
