"""The event store: the port the engine needs from storage, its errors, and its adapters.

The port (one Protocol per concern: `EventLog`, `GameIndex`, `PresenceStore`, `RateBuckets`, `StoreClock`;
`EventStore` is all of them) and its error tree live in `server.store.port`; the adapters are
`server.store.memory` (`MemoryEventStore`) and `server.store.redis` (`RedisEventStore`), and both pass each
concern's contract suite.
"""

from server.store.port import (
    Append,
    Appended,
    ConcurrencyConflict,
    EventLog,
    EventStore,
    GameExists,
    GameFenced,
    GameIndex,
    GameNotFound,
    HistoryChanged,
    Listed,
    PresenceStore,
    RateBuckets,
    Record,
    StoreClock,
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
    "EventLog",
    "EventStore",
    "GameExists",
    "GameIndex",
    "GameFenced",
    "GameNotFound",
    "HistoryChanged",
    "Listed",
    "PresenceStore",
    "RateBuckets",
    "Record",
    "StoreClock",
    "StoreError",
    "StoreFull",
    "StoreUnavailable",
    "TooManyGames",
    "UnreadableGame",
]
