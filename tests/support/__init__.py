"""Helpers shared by the test folders, imported as `tests.support.<module>`.

- `tests.support.redis`: redis-server processes on free loopback ports, a Redis Cluster, deadlines, game ids.
- `tests.support.servers`: `ServerProcess`, `orchestra serve` in a child process.
- `tests.support.e2e`: games, answers and log lines of the end-to-end tests.
- `tests.support.reliability`: games, placements and answers checked against the stream.
- `tests.support.browser`: screenshots, bots and a history's legality for the browser tests.
"""
