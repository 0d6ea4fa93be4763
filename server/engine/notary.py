"""Signing envelopes in batches: one signature per turn of the event loop, each envelope with its proof.

Every round of every game seals its envelopes' bodies and hands them to the node's notary, which signs
one checkpoint over a Merkle tree of what the rounds of the same loop turn sealed (`server.protocol.merkle`):
so a busy node signs once for many commands, across games, and an idle one signs once per command, as it
would one by one. No timer: the batch is what one loop turn sealed, and the last round of a turn signs at
once, without waiting for the turn to end.

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
    """Signs together the bodies the rounds of one turn of the event loop seal.

    A round that seals when no other game's round is due in the same turn signs at once, with whatever
    earlier rounds of the turn left waiting: it does not wait for the turn to end. Rounds are due when a
    command woke their game's worker (`expect`, then `sign(..., arriving=True)` or `arrived`); when some
    are due, the others wait for the last of them, or at most for the end of the turn (a worker may read
    the store before it seals, and a turn must not wait for that).
    """

    __slots__ = ("signer", "_clock", "_bodies", "_waiting", "_due", "_scheduled")

    def __init__(self, signer: Signer, clock: Callable[[], str]) -> None:
        self.signer = signer
        self._clock = clock
        self._bodies: list[bytes] = []
        self._waiting: list[tuple[asyncio.Future[list[bytes]], int]] = []  # each with its first body
        self._due = 0  # rounds a command woke that have not sealed yet
        self._scheduled = False

    def expect(self) -> None:
        """A command woke a game's worker: its round is due in this turn or the next."""
        self._due += 1

    def arrived(self) -> None:
        """A round that was due sealed nothing (or its worker ended without a round)."""
        self._due = max(0, self._due - 1)
        if not self._due and self._bodies:
            self._sign()

    def sign(self, bodies: Sequence[bytes], *, arriving: bool = False) -> asyncio.Future[list[bytes]]:
        """The stored lines of `bodies`, once their batch is signed (at once, when no other round is due:
        the future is then already done). `arriving`: the round was due (`expect`)."""
        loop = asyncio.get_running_loop()
        lines: asyncio.Future[list[bytes]] = loop.create_future()
        self._waiting.append((lines, len(self._bodies)))
        self._bodies.extend(bodies)
        if arriving:
            self._due = max(0, self._due - 1)
        if not self._due:
            self._sign()
        elif not self._scheduled:
            # Runs after every callback already ready in this turn: the rounds of every game that woke.
            self._scheduled = True
            loop.call_soon(self._end_of_turn)
        return lines

    def _end_of_turn(self) -> None:
        self._scheduled = False
        if self._bodies:
            # A round waited a whole turn: whatever was due and has not sealed (reading the store first,
            # or never started) is no longer waited for.
            self._due = 0
            self._sign()

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
