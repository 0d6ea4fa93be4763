"""Signing envelopes in batches: one signature per turn of the event loop, each envelope with its proof.

Every round of every game seals its envelopes' bodies and hands them to the node's notary, which signs,
once the loop has run every round ready in the same turn, one checkpoint over a Merkle tree of all of them
(`server.protocol.merkle`): so a busy node signs once for many commands, across games, and an idle one
signs once per command, as it would one by one. No timer: the batch is what one loop turn sealed, and a
round waits for the end of its own turn only.

Each envelope is stored with its proof (its inclusion path and the checkpoint), so it proves on its own
that the key signed it: `proof_problem` checks one, and the keyring checks each distinct checkpoint's
signature once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import msgspec

from server.engine.signing import Keyring, Signer
from server.protocol import merkle
from server.protocol.envelope import Proof, checkpoint_text, decode_proof, encode, with_proof


def signed_batch(bodies: Sequence[bytes], signer: Signer, at: str) -> list[bytes]:
    """The stored lines of `bodies` (at least one), signed together at time `at`: each body with its
    proof."""
    root, paths = merkle.tree([merkle.leaf_hash(body) for body in bodies])
    size, root_hex = len(bodies), root.hex()
    sig = signer.signature(checkpoint_text(signer.key_id, size, root_hex, at))
    return [
        with_proof(body, encode(Proof(index, size, [h.hex() for h in path], root_hex, at, sig)))
        for index, (body, path) in enumerate(zip(bodies, paths, strict=True))
    ]


class Notary:
    """Signs, once per turn of the event loop, the bodies every round sealed in that turn."""

    __slots__ = ("signer", "_clock", "_bodies", "_waiting")

    def __init__(self, signer: Signer, clock: Callable[[], str]) -> None:
        self.signer = signer
        self._clock = clock
        self._bodies: list[bytes] = []
        self._waiting: list[tuple[asyncio.Future[list[bytes]], int]] = []  # each with its first body

    def sign(self, bodies: Sequence[bytes]) -> asyncio.Future[list[bytes]]:
        """The stored lines of `bodies`, once this loop turn's batch is signed."""
        loop = asyncio.get_running_loop()
        if not self._waiting:
            # Runs after every callback already ready in this turn: the rounds of every game that woke.
            loop.call_soon(self._sign)
        lines: asyncio.Future[list[bytes]] = loop.create_future()
        self._waiting.append((lines, len(self._bodies)))
        self._bodies.extend(bodies)
        return lines

    def _sign(self) -> None:
        bodies, waiting = self._bodies, self._waiting
        self._bodies, self._waiting = [], []
        try:
            lines = signed_batch(bodies, self.signer, self._clock())
        except Exception as exc:  # every round of the batch answers its commands with it
            for future, _ in waiting:
                if not future.done():
                    future.set_exception(exc)
            return
        ends = [start for _, start in waiting[1:]] + [len(lines)]
        for (future, start), end in zip(waiting, ends, strict=True):
            if not future.done():  # a round cancelled meanwhile (its connection gone, a shutdown)
                future.set_result(lines[start:end])


def proof_problem(keys: Keyring, kid: str, body: bytes, proof_json: bytes) -> str | None:
    """Why a batch-signed line's proof does not vouch for its body, signed by key `kid`; None when it
    does: the body's leaf and its path lead to the checkpoint's root, and the key signed the checkpoint."""
    try:
        proof = decode_proof(proof_json)
        path = [bytes.fromhex(h) for h in proof.path]
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return "the proof is not an inclusion path and a checkpoint"
    if any(len(h) != 32 for h in path):
        return "the proof's path holds a hash that is not 32 bytes"
    root = merkle.root_from_path(merkle.leaf_hash(body), proof.index, proof.size, path)
    if root is None:
        return f"the proof's path cannot be one of leaf {proof.index} of {proof.size}"
    if root.hex() != proof.root:
        return (
            f"bad signature (key {kid}): the envelope or its proof was altered (its inclusion path does not "
            "lead to the signed root)"
        )
    return keys.check_checkpoint(kid, checkpoint_text(kid, proof.size, proof.root, proof.at), proof.sig)
