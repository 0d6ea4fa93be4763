"""The stored and wire form of an event: the envelope, its codec, its hash chain and upcasting.

Every stored envelope carries a schema version and the hash of the previous envelope's bytes (the
integrity chain), so neither an integrity check nor an upgrade ever needs a migration of old games. The
server signs every envelope it writes (`key`, `sig`; `server.engine.envelope.seal` chains and signs new
ones): the chain links the envelopes, the signature proves the server wrote each of them. Envelopes
written before signing carry neither field and still decode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import msgspec

from domain import Event

SCHEMA_VERSION = 1
# The `prev` of a game's first envelope: the chain starts from a fixed root.
GENESIS = "0" * 64


class Envelope(msgspec.Struct, frozen=True, gc=False):
    """One event as stored in a game's stream and sent to clients."""

    game_id: str
    version: int
    at: str
    command_id: str | None
    seat: int | None
    event: Event
    schema: int = SCHEMA_VERSION
    prev: str = GENESIS
    # The id of the key that signed the envelope, and the signature (None in envelopes written before
    # signing). Always the last two fields: the signed bytes are the stored line up to `sig`.
    key: str | None = None
    sig: str | None = None


encode = msgspec.json.Encoder().encode
_decode_current = msgspec.json.Decoder(Envelope).decode
_decode_any = msgspec.json.Decoder(dict[str, Any]).decode

# Upcasters turn the JSON object of an envelope of schema N into schema N + 1. Register one whenever an
# event changes shape in a way a default cannot cover; old games then stay readable without migration.
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[int, Upcaster] = {}


def decode(data: bytes) -> Envelope:
    """Decode stored envelope bytes, upcasting an envelope written under an older schema."""
    try:
        envelope = _decode_current(data)
    except msgspec.ValidationError:
        return _upcast(data)
    if envelope.schema < SCHEMA_VERSION:
        return _upcast(data)
    return envelope


def _upcast(data: bytes) -> Envelope:
    raw = _decode_any(data)
    schema = int(raw.get("schema", 0))
    while schema < SCHEMA_VERSION:
        step = UPCASTERS.get(schema)
        if step is None:
            raise msgspec.ValidationError(f"no upcaster from envelope schema {schema}")
        raw = step(raw)
        schema += 1
        raw["schema"] = schema
    return msgspec.convert(raw, Envelope)


def chain_hash(data: bytes) -> str:
    """The hash the next envelope carries as `prev`: SHA-256 of this envelope's stored bytes."""
    return hashlib.sha256(data).hexdigest()
