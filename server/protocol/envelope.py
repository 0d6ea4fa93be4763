"""The stored and wire form of an event: the envelope, its codec, its hash chain and upcasting.

Every stored envelope carries a schema version and the hash of the previous envelope's signed bytes
(the integrity chain), so neither an integrity check nor an upgrade ever needs a migration of old games.
The server signs what it writes: the envelopes one turn of its event loop sealed, across games, are the
leaves of a Merkle tree whose root it signs once, in a checkpoint; each envelope is stored with its
`proof` (its inclusion path and that checkpoint), so each still proves on its own that the server wrote
it. Envelopes written before batches carry a signature of their own (`sig`), and envelopes written before
signing carry neither; both still decode and verify.

A line's **body** is what its proof covers: the line without its proof field (`{..., "key": "<id>"}`),
the leaf of the tree and what the next envelope's `prev` hashes. A line signed alone is its own body.
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


class Proof(msgspec.Struct, frozen=True, gc=False):
    """Where an envelope stands in the batch its key signed: its leaf's `index` among `size` leaves, its
    inclusion path (sibling hashes, hex, leaf first), and the batch's checkpoint: the tree's `root` (hex),
    its time and the key's Ed25519 signature of `checkpoint_text` (base64)."""

    index: int
    size: int
    path: list[str]
    root: str
    at: str
    sig: str


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
    # The id of the key that signed the envelope, then its own signature (envelopes signed one by one) or
    # its proof (envelopes signed in batches); none of them in envelopes written before signing. Always
    # the last fields: the signed bytes are the stored line up to `sig` or `proof`.
    key: str | None = None
    sig: str | None = None
    proof: Proof | None = None


CHECKPOINT = "orchestra-checkpoint-v1"


def checkpoint_text(key: str, size: int, root: str, at: str) -> bytes:
    """The bytes a checkpoint's signature covers: a context line, the tree's size and root (hex, as C2SP
    tlog-checkpoints give size and root), then the key's id and the time, one per line."""
    return f"{CHECKPOINT}\n{size}\n{root}\n{key}\n{at}\n".encode()


encode = msgspec.json.Encoder().encode
decode_proof = msgspec.json.Decoder(Proof).decode
_UNSIGNED_END = b',"sig":null,"proof":null}'
PROOF_MARK = b',"proof":{'


def encode_body(item: Envelope) -> bytes:
    """The body of a new envelope, before its proof: its JSON object ending with its `key`."""
    data = encode(item)
    if not data.endswith(_UNSIGNED_END):
        raise ValueError("a body is encoded from an envelope without its sig or proof")
    return data[: -len(_UNSIGNED_END)] + b"}"


def with_proof(body: bytes, proof: bytes) -> bytes:
    """The stored line of a body and its encoded proof."""
    return body[:-1] + PROOF_MARK[:-1] + proof + b"}"


def split_proof(line: bytes) -> tuple[bytes, bytes] | None:
    """A batch-signed line's body and the JSON of its proof; None for a line without a proof."""
    if not line.endswith(b"}}"):
        return None
    cut = line.rfind(PROOF_MARK)
    if cut < 0:
        return None
    return line[:cut] + b"}", line[cut + len(PROOF_MARK) - 1 : -1]


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
    """The hash the next envelope carries as `prev`: SHA-256 of this envelope's body (its stored bytes
    without a proof; for a line signed alone, or not signed, the whole line)."""
    split = split_proof(data)
    return hashlib.sha256(data if split is None else split[0]).hexdigest()
