"""Checking that the server's key wrote an envelope as it is (docs/protocol.md section 7).

    keys = await SigningKeys.fetch(base_url)          # GET /signing-keys
    checked = verify_envelope(envelope, keys)         # an envelope as received (dict), or its stored line
    if not checked.ok:
        print(checked.problem)

An envelope's **body** (the envelope without its `proof`) is a leaf of a Merkle tree (RFC 6962 hashing)
whose root the server's key signed once, in a checkpoint, for every envelope one turn of its event loop
sealed; `proof` holds the leaf's path to that root and the checkpoint. So an envelope is checked on its
own: its leaf hash up its path must reach the checkpoint's root, and the checkpoint's Ed25519 signature
must hold for a key `GET /signing-keys` lists. Envelopes signed one at a time (before batches) carry
their own signature (`sig`) instead. A `SigningKeys` remembers the checkpoints it has checked, so the
envelopes of one batch cost one signature between them.

A dict is encoded again as the server wrote it (compact JSON, fields in order, which `json` and msgspec
decoding keep); a line of `GET /games/{id}/events` (bytes) is checked as it is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

# The tree hashing and the checkpoint's text are the wire format's own (docs/protocol.md, section 7).
from server.protocol.envelope import chain_hash as protocol_chain_hash
from server.protocol.envelope import checkpoint_text, split_proof
from server.protocol.merkle import leaf_hash, root_from_path

Json = dict[str, Any]

ENVELOPE_CONTEXT = b"orchestra-envelope-v1\n"
GENESIS = "0" * 64
_SIG_MARK = b',"sig":"'
# Past this many checked checkpoints, a SigningKeys forgets them all and checks anew.
CHECKED_CHECKPOINTS = 65_536

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode


@dataclass(frozen=True, slots=True)
class Verified:
    """What `verify_envelope` found: `ok`, or the `problem` in words. True when ok."""

    ok: bool
    problem: str | None = None

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True, slots=True)
class _Key:
    key: Ed25519PublicKey
    retired_at: datetime | None


class SigningKeys:
    """The public keys `GET /signing-keys` lists (its answer, or its `keys` list), by their ids, and the
    checkpoints already checked with them."""

    def __init__(self, listing: Json | Sequence[Json]) -> None:
        entries = listing.get("keys", ()) if isinstance(listing, dict) else listing
        self._keys: dict[str, _Key] = {}
        for entry in entries:
            try:
                raw = base64.b64decode(entry["public_key"], validate=True)
                public = Ed25519PublicKey.from_public_bytes(raw)
                retired = entry.get("retired_at")
                retired_at = _time(retired) if retired else None
            except (KeyError, TypeError, ValueError, binascii.Error):
                continue  # not a key this client can use: nothing it signed verifies
            # The id is the key's own (its SHA-256's first 16 hex digits), whatever the listing calls it.
            self._keys[hashlib.sha256(raw).hexdigest()[:16]] = _Key(public, retired_at)
        self._checked: set[tuple[bytes, str]] = set()
        self.checkpoints_checked = 0  # checkpoint signatures verified, not remembered

    @classmethod
    async def fetch(cls, base_url: str) -> SigningKeys:
        """The keys of the server at `base_url` (GET /signing-keys). Raises: httpx.HTTPError."""
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            response = await http.get("/signing-keys")
            response.raise_for_status()
            return cls(response.json())

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def verify(self, envelope: Json | bytes) -> Verified:
        """`verify_envelope(envelope, self)`."""
        return verify_envelope(envelope, self)

    def _checkpoint(self, kid: str, text: bytes, signature: str) -> str | None:
        if (text, signature) in self._checked:
            return None
        self.checkpoints_checked += 1
        if not _holds(self._keys[kid].key, signature, text):
            return f"bad checkpoint signature (key {kid}): the checkpoint or the signature was altered"
        if len(self._checked) >= CHECKED_CHECKPOINTS:
            self._checked.clear()
        self._checked.add((text, signature))
        return None


def verify_envelope(envelope: Json | bytes, keys: SigningKeys | Json | Sequence[Json]) -> Verified:
    """Whether a key of `keys` wrote `envelope` as it is: its proof's inclusion path from its body to the
    checkpoint's root and the checkpoint's signature (an envelope signed alone: its own signature).
    `envelope` is the dict as received, or a stored line (bytes); `keys` a `SigningKeys` (it remembers
    the checkpoints it checked) or `GET /signing-keys`'s answer."""
    if not isinstance(keys, SigningKeys):
        keys = SigningKeys(keys)
    try:
        item, body, proof, signed = _parts(envelope)
    except (msgspec.DecodeError, TypeError, ValueError):
        return Verified(False, "not an envelope")
    if proof is None and signed is None:
        return Verified(False, "not signed")
    kid = item.get("key")
    if not isinstance(kid, str):
        return Verified(False, "signed, but names no key")
    trusted = keys._keys.get(kid)
    if trusted is None:
        return Verified(False, f"signed by key {kid}, which is not one of the trusted keys")
    problem = _retirement_problem(kid, trusted, item.get("at"))
    if problem is None:
        problem = (
            _proof_problem(keys, kid, item, body, proof)
            if proof is not None
            else _alone_problem(trusted, kid, body, signed)
        )
    return Verified(problem is None, problem)


def chain_hash(envelope: Json | bytes) -> str:
    """What the next envelope's `prev` holds: SHA-256 (hex) of this one's body (its line without its
    proof; an envelope signed alone, or not signed: its whole line)."""
    if isinstance(envelope, bytes):
        return protocol_chain_hash(envelope)
    return hashlib.sha256(_encode({k: v for k, v in envelope.items() if k != "proof"})).hexdigest()


def _parts(envelope: Json | bytes) -> tuple[Json, bytes, Json | None, str | None]:
    """The envelope's fields, its body's bytes, its proof and its own signature (either None)."""
    if isinstance(envelope, bytes):
        line = envelope.strip()
        split = split_proof(line)
        if split is not None:
            body, proof_json = split
            return _decode(body), body, _decode(proof_json), None
        item = _decode(line)
        cut = line.rfind(_SIG_MARK)
        if isinstance(item.get("sig"), str) and cut >= 0 and line.endswith(b'"}'):
            return item, line[:cut] + b"}", None, item["sig"]
        return item, line, None, None
    if not isinstance(envelope, dict):
        raise TypeError("an envelope is a dict or a line")
    proof = envelope.get("proof")
    if proof is not None:
        item = {k: v for k, v in envelope.items() if k != "proof"}
        return item, _encode(item), proof, None
    sig = envelope.get("sig")
    if isinstance(sig, str):
        return envelope, _encode({k: v for k, v in envelope.items() if k != "sig"}), None, sig
    return envelope, b"", None, None


def _proof_problem(keys: SigningKeys, kid: str, item: Json, body: bytes, proof: Json) -> str | None:
    if "sig" in item or list(item)[-1] != "key":
        return "a proof must follow the key, as the only field after it"
    index, size, path, root, at, sig = (proof.get(f) for f in ("index", "size", "path", "root", "at", "sig"))
    if not (
        type(index) is int
        and type(size) is int
        and isinstance(path, list)
        and isinstance(root, str)
        and isinstance(at, str)
        and isinstance(sig, str)
    ):
        return "the proof is not an inclusion path and a checkpoint"
    not_hashes = "the proof's path holds a hash that is not 32 bytes of hex"
    if not all(isinstance(h, str) and len(h) == 64 for h in path):
        return not_hashes
    try:
        hashes = [bytes.fromhex(h) for h in path]
    except ValueError:
        return not_hashes
    if any(len(h) != 32 for h in hashes):
        return not_hashes
    reached = root_from_path(leaf_hash(body), index, size, hashes)
    if reached is None:
        return f"the proof's path cannot be one of leaf {index} of {size}"
    if reached.hex() != root:
        return (
            f"bad signature (key {kid}): the envelope or its proof was altered (its inclusion path does not "
            "lead to the signed root)"
        )
    return keys._checkpoint(kid, checkpoint_text(kid, size, root, at), sig)


def _alone_problem(trusted: _Key, kid: str, body: bytes, signature: str | None) -> str | None:
    if signature is None or not _holds(trusted.key, signature, ENVELOPE_CONTEXT + body):
        return f"bad signature (key {kid}): the envelope was altered"
    return None


def _retirement_problem(kid: str, trusted: _Key, at: object) -> str | None:
    if trusted.retired_at is None:
        return None
    try:
        when = _time(str(at))
    except ValueError:
        when = None
    if when is None or when >= trusted.retired_at:
        return (
            f"signed by key {kid} and dated {at}, not before its retirement: a retired key vouches only "
            "for what it signed before"
        )
    return None


def _holds(key: Ed25519PublicKey, signature: str, data: bytes) -> bool:
    try:
        key.verify(base64.b64decode(signature, validate=True), data)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def _time(text: str) -> datetime:
    when = datetime.fromisoformat(text.strip())
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
