"""`orchestra records rebuild`: the next version of the tables is built beside the live one from the
streams, reads switch to it once it has caught up, and the running projector follows the switch."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from server.records.database import SqlRecords
from tests.records.play import play_game
from tests.records.test_kill_restart import projector
from tests.records.test_projector import expected, rows_of
from tests.support.redis import RedisProcess
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def rebuild(redis_url: str, records_url: str, log: Path) -> subprocess.Popen[bytes]:
    return projector(redis_url, records_url, log, "rebuild")


async def test_a_rebuild_gives_the_same_tables_switches_reads_and_the_projector_follows(
    own_redis: RedisProcess,
    start_server: Callable[..., ServerProcess],
    tmp_path: Path,
    records_url: str,
    open_db: Callable[[], SqlRecords],
) -> None:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(1)
    played = [await play_game(server.url, rng) for _ in range(6)]
    log = tmp_path / "projector.log"
    live = projector(own_redis.url, records_url, log)
    try:

        async def caught_up() -> None:
            assert rows_of(open_db, played) == await expected(server.url, played)

        await eventually(caught_up, timeout=30)
        reader = open_db()
        try:
            assert reader.version == 1
            assert rebuild(own_redis.url, records_url, log).wait(60) == 0, log.read_text()
            assert "reads switched to version 2" in log.read_text()
            assert reader.follow() and reader.version == 2
        finally:
            reader.close()
        assert rows_of(open_db, played) == await expected(server.url, played)

        played += [await play_game(server.url, rng) for _ in range(3)]  # the live projector now writes v2
        await eventually(caught_up, timeout=30)

        assert rebuild(own_redis.url, records_url, log).wait(60) == 0, log.read_text()
        assert rows_of(open_db, played) == await expected(server.url, played)
        first = open_db()
        try:
            assert first.version == 3
        finally:
            first.close()
    finally:
        live.kill()
        live.wait(10)
