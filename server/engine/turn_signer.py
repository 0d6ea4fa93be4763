"""One signature per turn of the event loop: the envelopes every game writes in a turn, signed together.

An Ed25519 signature costs more CPU than most of a command's path. Games that decide commands in the same
turn of the loop hand their envelopes here; at the end of the turn one signature covers them all, over
the root of a Merkle tree of their lines, and each line carries its own path (`server.engine.signing`),
so each still verifies alone. A line that is the only one of its turn is signed exactly as
`Signer.sign` signs it. A batch holds at most `MAX_BATCH` lines: a line's path grows with the log of its
batch, and past a few dozen lines a signature's share of each is already small.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from server.engine.signing import ENVELOPE, Signer

MAX_BATCH = 32


class TurnSigner:
    """Collects the envelope lines of one turn of the loop and signs them with one signature."""

    __slots__ = ("signer", "_waiting", "_observe")

    def __init__(self, signer: Signer, observe: Callable[[int], None] | None = None) -> None:
        self.signer = signer
        self._waiting: list[tuple[bytes, asyncio.Future[bytes]]] = []
        self._observe = observe  # told the size of each batch signed

    def sign(self, unsigned: bytes) -> asyncio.Future[bytes]:
        """The signed line of an unsigned envelope line (as `Signer.sign` takes it), by the end of the
        turn."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._flush)
        self._waiting.append((unsigned, future))
        return future

    def _flush(self) -> None:
        waiting, self._waiting = self._waiting, []
        for start in range(0, len(waiting), MAX_BATCH):
            self._sign(waiting[start : start + MAX_BATCH])

    def _sign(self, batch: list[tuple[bytes, asyncio.Future[bytes]]]) -> None:
        try:
            lines = self.signer.sign_batch(ENVELOPE, [unsigned for unsigned, _ in batch])
        except Exception as exc:  # a line that cannot be signed fails its batch's rounds, not the loop
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        if self._observe is not None:
            self._observe(len(lines))
        for (_, future), line in zip(batch, lines, strict=True):
            if not future.done():  # a round cancelled meanwhile (shutdown) takes nothing
                future.set_result(line)
