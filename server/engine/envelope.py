"""Sealing new envelopes: each chained to the one before it and signed by the node's key.

The envelope itself, its codec and its chain are the protocol's (`server.protocol.envelope`); signing is
the engine's, as it holds the node's key (`server.engine.signing`).
"""

from __future__ import annotations

from collections.abc import Sequence

from domain import Event
from server.engine.signing import ENVELOPE, Signer
from server.protocol.envelope import Envelope, chain_hash, encode


def seal(
    game_id: str,
    version: int,
    chain_head: str,
    at: str,
    command_id: str,
    seat: int | None,
    events: Sequence[Event],
    signer: Signer,
) -> tuple[list[Envelope], list[bytes], str]:
    """The envelopes of `events` as versions version+1.., chained from `chain_head` and each signed by
    `signer`: as values (without their signatures), encoded, and the chain head after the last."""
    items: list[Envelope] = []
    data: list[bytes] = []
    sign, kid = signer.sign, signer.key_id
    for offset, event in enumerate(events, start=1):
        item = Envelope(
            game_id=game_id,
            version=version + offset,
            at=at,
            command_id=command_id,
            seat=seat,
            event=event,
            prev=chain_head,
            key=kid,
        )
        encoded = sign(ENVELOPE, encode(item))
        chain_head = chain_hash(encoded)
        items.append(item)
        data.append(encoded)
    return items, data, chain_head
