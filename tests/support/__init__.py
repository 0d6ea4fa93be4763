"""Helpers shared by the test folders, imported as `support.<module>` (pytest puts tests/ on sys.path).

- `support.redis`: redis-server processes on free loopback ports, a Redis Cluster, deadlines, game ids.
- `support.servers`: `ServerProcess`, `orchestra serve` in a child process.
- `support.e2e`: games, answers and log lines of the end-to-end tests.
- `support.reliability`: games, placements and answers checked against the stream.
- `support.browser`: screenshots, bots and a history's legality for the browser tests.

Modules here import absolutely only: `import redis` in `support.redis` is the redis package, since only
tests/ (never tests/support) is on sys.path.
"""
