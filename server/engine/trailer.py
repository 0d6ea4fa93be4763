"""The signed trailer of an export: the game, its last version and that envelope's hash, when exported.

A trailer is the last line of an export (`GET /games/{id}/events?trailer=true`, `orchestra export`): a
file that lost envelopes at its end no longer matches its trailer, and one that lost the trailer too
has neither it nor (unless the game had ended) a signed end, which `verify` reports.

An archive's trailer (`orchestra archive`) also carries the game's credentials: the hashes of its seat and
watch tokens (never the tokens), under the trailer's signature, so that `orchestra import` can restore
the right to play and watch the game, and no one can add a token of their own to the file unseen. An
export's trailer has none: credentials are never served.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from domain import GameEnded, NextGame
from server.engine.signing import TRAILER, Signer
from server.protocol import envelope
from server.store import Record

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


class ArchiveTrailer(msgspec.Struct, frozen=True, tag="trailer", tag_field="type"):
    """An archive's trailer: a trailer with the game's credential hashes (a reader of `Trailer` skips
    them). Decoded from an export's trailer, its credentials are empty."""

    game_id: str
    version: int
    head: str
    ended: bool
    at: str
    credentials: dict[str, str] = {}
    key: str | None = None
    sig: str | None = None


decode_trailer = msgspec.json.Decoder(Trailer).decode
_decode_archive_trailer = msgspec.json.Decoder(ArchiveTrailer).decode
_encode = msgspec.json.Encoder().encode


def trailer_line(
    game_id: str,
    records: Sequence[Record],
    at: str,
    signer: Signer,
    credentials: Mapping[str, str] | None = None,
) -> bytes:
    """The signed trailer of an export ending with `records`' last (a whole game's: never empty); with
    `credentials`, an archive's trailer carrying them."""
    last = records[-1]
    # An ended game's last event is its end, or the next game that follows it.
    ended = isinstance(envelope.decode(last.data).event, GameEnded | NextGame)
    chain_head = envelope.chain_hash(last.data)
    unsigned: Trailer | ArchiveTrailer
    if credentials is None:
        unsigned = Trailer(game_id, last.version, chain_head, ended, at, key=signer.key_id)
    else:
        unsigned = ArchiveTrailer(
            game_id, last.version, chain_head, ended, at, dict(sorted(credentials.items())), key=signer.key_id
        )
    return signer.sign(TRAILER, _encode(unsigned))


def trailer_credentials(line: bytes) -> dict[str, str]:
    """The credential hashes a trailer carries ({} for an export's). Check its signature first: only a
    signed trailer's are the server's.

    Raises: msgspec.DecodeError, msgspec.ValidationError (not a trailer).
    """
    return _decode_archive_trailer(line).credentials
