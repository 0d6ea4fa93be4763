"""The notary signs what the rounds of one loop turn seal: at once when no other round is due, else with
the last round due, and at the latest at the end of the turn."""

from __future__ import annotations

import asyncio

from server.engine.notary import Notary
from server.engine.signing import Signer
from server.protocol import envelope

AT = "2026-12-05T10:00:00.000Z"


def _body(n: int) -> bytes:
    return b'{"game_id":"g%d","version":1,"key":"k"}' % n


def _checkpoint(line: bytes) -> tuple[str, int]:
    split = envelope.split_proof(line)
    assert split is not None
    proof = envelope.decode_proof(split[1])
    return proof.sig, proof.size


class Counting(Signer):
    count = 0

    def signature(self, data: bytes) -> str:
        Counting.count += 1
        return super().signature(data)


def _notary() -> Notary:
    Counting.count = 0
    return Notary(Counting(Signer.generate()._private), lambda: AT)


async def test_a_round_alone_is_signed_at_once_without_waiting_for_the_turn() -> None:
    notary = _notary()
    lines = notary.sign([_body(1), _body(2)])
    assert lines.done() and Counting.count == 1
    assert [_checkpoint(line)[1] for line in lines.result()] == [2, 2]


async def test_rounds_due_in_a_turn_wait_for_the_last_and_share_one_signature() -> None:
    notary = _notary()
    for _ in range(3):
        notary.expect()
    first = notary.sign([_body(1)], arriving=True)
    second = notary.sign([_body(2)], arriving=True)
    assert not first.done() and not second.done() and Counting.count == 0
    notary.arrived()  # the third sealed nothing: the batch is complete
    assert first.done() and second.done() and Counting.count == 1
    assert _checkpoint(first.result()[0]) == _checkpoint(second.result()[0])
    third = notary.sign([_body(3)])
    assert third.done() and Counting.count == 2


async def test_a_round_due_that_never_seals_holds_the_others_one_turn_at_most() -> None:
    notary = _notary()
    notary.expect()
    notary.expect()
    lines = notary.sign([_body(1)], arriving=True)
    assert not lines.done()
    await asyncio.sleep(0)  # the end of the turn
    await asyncio.sleep(0)
    assert lines.done() and Counting.count == 1
    # What was due is no longer waited for: the next round signs at once.
    assert notary.sign([_body(2)]).done() and Counting.count == 2
