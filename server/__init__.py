"""The async shell around domain/ and projections/: `protocol` (frames and the sans-I/O session), `engine`
(one owner per live game, the wall, presence), `store` (the event store port, its Redis and memory
adapters), `web` (routes and pages), `ops` (the command line, embedded Redis, archive) and `compat` (the
one place that touches dependencies' private parts)."""
