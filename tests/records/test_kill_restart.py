"""`orchestra records` killed with SIGKILL at random points and restarted: its tables still equal every
game's final view, nothing counted twice or missed; and one projector writes at a time (the lease)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from server.records.database import SqlRecords
from tests.records.play import Played, play_game
from tests.records.test_projector import expected, rows_of
from tests.support.redis import RedisProcess
from tests.support.servers import ROOT, ServerProcess

pytestmark = pytest.mark.integration

# Bounded for CI; the long run: ORCHESTRA_TEST_RECORDS_GAMES=140 ORCHESTRA_TEST_RECORDS_KILLS=30
# (200 games, 30 kills).
GAMES = int(os.environ.get("ORCHESTRA_TEST_RECORDS_GAMES", "10"))
KILLS = int(os.environ.get("ORCHESTRA_TEST_RECORDS_KILLS", "5"))


def projector(redis_url: str, records_url: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "server.ops.cli", "records", "--redis-url", redis_url]
    command += ["--records-url", records_url, "--interval", "0.02", "--lease-seconds", "0.5", *extra]
    with log.open("ab") as out:
        return subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


async def test_a_projector_killed_at_random_points_and_restarted_misses_nothing_and_counts_nothing_twice(
    own_redis: RedisProcess,
    start_server: Callable[..., ServerProcess],
    tmp_path: Path,
    records_url: str,
    open_db: Callable[[], SqlRecords],
) -> None:
    nodes = [start_server(redis_url=own_redis.url), start_server(redis_url=own_redis.url)]
    server = nodes[0]
    rng = random.Random(4343)
    log = tmp_path / "projector.log"
    # Games played on two nodes of one store: the projector reads the store, whichever node wrote.
    played: list[Played] = [await play_game(nodes[n % 2].url, rng) for n in range(GAMES)]
    for _ in range(KILLS):
        child = projector(own_redis.url, records_url, log)
        played += [await play_game(nodes[n % 2].url, rng) for n in range(2)]
        time.sleep(rng.uniform(0.2, 1.5))
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    final = projector(own_redis.url, records_url, log, "--once")
    assert final.wait(60) == 0, log.read_text()
    assert rows_of(open_db, played) == await expected(server.url, played)
    assert len(rows_of(open_db, played)) == len(played) == GAMES + 2 * KILLS


async def test_a_second_projector_waits_for_the_lease_and_takes_it_when_the_first_is_gone(
    own_redis: RedisProcess, tmp_path: Path
) -> None:
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    first = projector(own_redis.url, f"sqlite:///{tmp_path / 'a.sqlite3'}", first_log)
    deadline = time.monotonic() + 30
    while "projecting" not in first_log.read_text():
        assert time.monotonic() < deadline and first.poll() is None, first_log.read_text()
        time.sleep(0.05)
    second = projector(own_redis.url, f"sqlite:///{tmp_path / 'b.sqlite3'}", second_log, "--once")
    try:
        time.sleep(2)
        assert second.poll() is None
        assert "another projector holds the lease" in second_log.read_text()
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert second.wait(30) == 0, second_log.read_text()
        assert "projecting" in second_log.read_text()
    finally:
        for child in (first, second):
            if child.poll() is None:
                child.kill()
                child.wait(10)
