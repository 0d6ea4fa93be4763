"""`orchestra records` on a Redis behind Sentinels: ORCHESTRA_REDIS_URL a redis+sentinel:// URL, as the
servers take it. A real primary, its replica and three Sentinels: the projector follows the games, and goes
on through a failover to the replica, its lease with it."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from server.records.database import GameQuery, SqlRecords, sqlite_records
from server.records.lease import KEY
from server.store.redis.keys import GAMES_KEY, events_key
from tests.records.games import events, play, stored
from tests.records.play import play_game
from tests.records.test_projector import expected, rows_of
from tests.records.test_status import metric, status_url
from tests.support.redis import SentinelProcess, start_replicated, start_sentinels
from tests.support.servers import ROOT, ServerProcess
from tests.support.waiting import eventually, until

pytestmark = pytest.mark.integration

SERVICE = "orchestra-records"
# Down-after, the election and the promotion, with a loaded machine's slack.
FAILOVER_DEADLINE = 30.0


class Sentinels:
    """A primary, its replica, three Sentinels watching them, and the redis+sentinel:// URL naming them."""

    def __init__(self, root: Path) -> None:
        self.primary, self.replica = start_replicated(root)
        self.sentinels: list[SentinelProcess] = []
        try:
            self.sentinels = start_sentinels(root, self.primary, SERVICE, down_after_ms=1000)
        except BaseException:
            self.stop()
            raise
        ports = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        self.url = f"redis+sentinel://{ports}/{SERVICE}"

    def primary_port(self) -> int:
        with redis.Redis(port=self.sentinels[0].port, socket_timeout=1, decode_responses=True) as client:
            return int(client.sentinel_get_master_addr_by_name(SERVICE)[1])

    def stop(self) -> None:
        for node in (*self.sentinels, self.replica, self.primary):
            node.stop()


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    found = Sentinels(tmp_path / "redis")
    try:
        yield found
    finally:
        found.stop()


def projector(url: str, records_url: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """`orchestra records` with the store named only by ORCHESTRA_REDIS_URL, as a server beside it has it."""
    command = [sys.executable, "-m", "server.ops.cli", "records", "--records-url", records_url]
    command += ["--interval", "0.05", "--lease-seconds", "3", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env["ORCHESTRA_REDIS_URL"] = url
    with log.open("ab") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def write_game(port: int, game_id: str) -> None:
    """An ended game's envelopes written straight into the Redis on `port`, as a server would store them."""
    log, _ = events(play(random.Random(game_id), game_id))
    with redis.Redis(port=port, socket_timeout=5) as client:
        for version, data in enumerate(stored(game_id, log), 1):
            client.xadd(events_key(game_id), {"e": data}, id=f"0-{version}")
        client.zadd(GAMES_KEY, {game_id: time.time()})


async def test_the_projector_follows_the_sentinels_primary_through_a_failover(
    sentinels: Sentinels, start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = start_server(redis_url=sentinels.url)
    rng = random.Random(26379)
    played = [await play_game(server.url, rng) for _ in range(6)]
    path = tmp_path / "records.sqlite3"
    open_db: Callable[[], SqlRecords] = lambda: sqlite_records(path)  # noqa: E731
    log = tmp_path / "projector.log"
    assert projector(sentinels.url, f"sqlite:///{path}", log, "--once").wait(60) == 0, log.read_text()
    assert rows_of(open_db, played) == await expected(server.url, played)
    server.stop()  # the games after the failover are written straight into Redis

    child = projector(sentinels.url, f"sqlite:///{path}", log, "--port", "0")
    try:
        url = status_url(log)
        with redis.Redis(port=sentinels.primary.port, socket_timeout=5) as client:
            await until(lambda: client.get(KEY) is not None, 30, "the projector holding the lease")
            assert client.wait(1, 5000) == 1, "the replica did not receive the lease"

        def passes() -> float:
            return metric(httpx.get(url + "/metrics").text, "orchestra_records_passes")

        # A pass ended before the failover, so that one after it is a second.
        await until(lambda: passes() >= 1, 30, "the projector's first pass")
        sentinels.primary.kill()
        await until(
            lambda: sentinels.primary_port() == sentinels.replica.port,
            FAILOVER_DEADLINE,
            "the replica promoted",
        )
        later = [f"after{n}" for n in range(3)]
        for game_id in later:
            write_game(sentinels.replica.port, game_id)

        def all_projected() -> None:
            database = open_db()
            try:
                shown = (*later, *(p.game_id for p in played))
                found = {g.game_id for g in database.games(GameQuery(limit=200, shown=shown))}
            finally:
                database.close()
            assert found == set(shown)

        await eventually(all_projected, timeout=FAILOVER_DEADLINE)
        assert child.poll() is None, log.read_text()
        assert passes() >= 2
        with redis.Redis(port=sentinels.replica.port, socket_timeout=5) as client:
            assert client.get(KEY) is not None, "the lease is held on the promoted replica"
    finally:
        child.kill()
        child.wait(10)


def test_a_bad_sentinel_url_is_refused_in_words(tmp_path: Path) -> None:
    log = tmp_path / "projector.log"
    child = projector("redis+sentinel://127.0.0.1:1", f"sqlite:///{tmp_path / 'r.sqlite3'}", log, "--once")
    assert child.wait(60) == 2
    assert "service_name" in log.read_text() and "Traceback" not in log.read_text()
