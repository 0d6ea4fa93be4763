"""The event store: the port the engine needs from storage, its errors, and its adapters.

The port and its error tree live in `server.store.port`; the adapters are `server.store.memory`
(`MemoryEventStore`) and `server.store.redis` (`RedisEventStore`), and both pass one contract suite.
"""

from server.store.port import (
    Append,
    Appended,
    ConcurrencyConflict,
    Current,
    EventStore,
    GameExists,
    GameFenced,
    GameNotFound,
    HistoryChanged,
    Known,
    Listed,
    Record,
    StoreError,
    StoreFull,
    StoreUnavailable,
    TooManyGames,
    UnreadableGame,
)

__all__ = [
    "Append",
    "Appended",
    "ConcurrencyConflict",
    "EventStore",
    "GameExists",
    "GameFenced",
    "GameNotFound",
    "HistoryChanged",
    "Current",
    "Known",
    "Listed",
    "Record",
    "StoreError",
    "StoreFull",
    "StoreUnavailable",
    "TooManyGames",
    "UnreadableGame",
]
