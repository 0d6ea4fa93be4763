"""The tests' redis-server children: a port taken between being found free and being bound is left for
another on a first start, never on a restart."""

from __future__ import annotations

import socket
from pathlib import Path

import redis

from tests.support.redis import RedisProcess


def test_a_first_start_on_a_port_taken_meanwhile_moves_to_a_free_one_and_restarts_keep_it(
    tmp_path: Path,
) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    server = RedisProcess(tmp_path / "redis")
    server.port = taken  # as if another process bound it after it was found free
    try:
        server.start()
        assert server.port != taken and server.url.endswith(f":{server.port}")
        with redis.Redis(port=server.port) as client:
            assert client.ping()
        moved = server.port
        server.stop()
        server.start()
        assert server.port == moved
    finally:
        server.stop()
        holder.close()
