"""The records projector on a Redis Cluster: a position per game, no global order, the lease in the
Cluster; its rows equal every game's final view."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.records.database import SqlRecords, sqlite_records
from tests.records.play import play_game
from tests.records.test_kill_restart import projector
from tests.records.test_projector import expected, rows_of
from tests.support.redis import start_cluster
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster_url(tmp_path: Path) -> Iterator[str]:
    nodes, url = start_cluster(tmp_path / "cluster", 3)
    try:
        yield url
    finally:
        for node in nodes:
            node.stop()


async def test_the_projector_follows_every_game_of_a_cluster(
    cluster_url: str, start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = start_server(redis_url=cluster_url)
    rng = random.Random(3)
    played = [await play_game(server.url, rng) for _ in range(8)]
    path = tmp_path / "records.sqlite3"
    log = tmp_path / "projector.log"
    assert projector(cluster_url, f"sqlite:///{path}", log, "--once").wait(60) == 0, log.read_text()
    open_db: Callable[[], SqlRecords] = lambda: sqlite_records(path)  # noqa: E731
    assert rows_of(open_db, played) == await expected(server.url, played)
    assert len(rows_of(open_db, played)) == 8
