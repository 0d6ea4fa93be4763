"""Sealing new envelopes: each chained to the one before it and named for the key that will sign it.

The envelope itself, its codec and its chain are the protocol's (`server.protocol.envelope`); signing is
the engine's notary's (`server.engine.notary`), which signs the bodies sealed here in batches.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain import Event
from server.protocol.envelope import Envelope, chain_hash, encode_body


def seal(
    game_id: str,
    version: int,
    chain_head: str,
    at: str,
    command_id: str,
    seat: int | None,
    events: Sequence[Event],
    key: str,
) -> tuple[list[Envelope], list[bytes], str]:
    """The envelopes of `events` as versions version+1.., chained from `chain_head`, to be signed by key
    `key`: as values, as bodies (encoded, without their proofs), and the chain head after the last."""
    items: list[Envelope] = []
    bodies: list[bytes] = []
    for offset, event in enumerate(events, start=1):
        item = Envelope(
            game_id=game_id,
            version=version + offset,
            at=at,
            command_id=command_id,
            seat=seat,
            event=event,
            prev=chain_head,
            key=key,
        )
        body = encode_body(item)
        chain_head = chain_hash(body)
        items.append(item)
        bodies.append(body)
    return items, bodies, chain_head
