"""One append through the store's one append path (`append_many`), its error raised: what a test of a
single write reads best as."""

from __future__ import annotations

from collections.abc import Sequence

from server.store import Append, Appended, EventLog, StoreError


async def append(
    store: EventLog,
    game_id: str,
    expected: int,
    envelopes: Sequence[bytes],
    command_key: str,
    after: bytes | None = None,
) -> Appended:
    """Append `envelopes` to `game_id` at `expected` as `store.append_many` would, alone in its batch.

    Raises: the StoreError the store answered it with (ConcurrencyConflict, GameFenced, ...).
    """
    (result,) = await store.append_many([Append(game_id, expected, envelopes, command_key, after)])
    if isinstance(result, StoreError):
        raise result
    return result
