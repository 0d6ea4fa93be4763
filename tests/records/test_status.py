"""The projector's status: /readyz is 200 once caught up (503 before, and while it waits for the lease),
/metrics shows its lag; a projector that lags behind new games catches up."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from server.records.database import SqlRecords
from tests.records.play import play_game
from tests.records.test_kill_restart import projector
from tests.records.test_projector import expected, rows_of
from tests.support.redis import RedisProcess
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def status_url(log: Path) -> str:
    deadline = time.monotonic() + 30
    while (found := re.search(r"status on (http://\S+)", log.read_text())) is None:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return found.group(1)


def ready(url: str) -> Callable[[], None]:
    def check() -> None:
        assert httpx.get(url + "/readyz").status_code == 200

    return check


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, text
    return float(found.group(1))


async def test_a_lagging_projector_catches_up_and_says_so(
    own_redis: RedisProcess,
    start_server: Callable[..., ServerProcess],
    tmp_path: Path,
    open_db: Callable[[], SqlRecords],
    records_url: str,
) -> None:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(99)
    played = [await play_game(server.url, rng) for _ in range(4)]
    log = tmp_path / "projector.log"
    child = projector(own_redis.url, records_url, log, "--port", "0")
    try:
        url = status_url(log)
        await eventually(ready(url), timeout=30)
        text = httpx.get(url + "/metrics").text
        assert metric(text, "orchestra_records_games_behind") == 0
        assert metric(text, "orchestra_records_lag_seconds") == 0
        assert metric(text, "orchestra_records_passes") >= 1
        played += [await play_game(server.url, rng) for _ in range(4)]
        want = await expected(server.url, played)

        def caught_up() -> None:
            assert rows_of(open_db, played) == want

        await eventually(caught_up, timeout=30)
        assert httpx.get(url + "/healthz").json() == {"status": "ok"}
        assert httpx.get(url + "/nothing").status_code == 404
    finally:
        child.kill()
        child.wait(10)


async def test_a_projector_waiting_for_the_lease_is_not_ready(
    own_redis: RedisProcess, tmp_path: Path
) -> None:
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    first = projector(own_redis.url, f"sqlite:///{tmp_path / 'a.sqlite3'}", first_log, "--port", "0")
    second = None
    try:
        first_url = status_url(first_log)
        await eventually(ready(first_url), timeout=30)
        second = projector(own_redis.url, f"sqlite:///{tmp_path / 'b.sqlite3'}", second_log, "--port", "0")
        second_url = status_url(second_log)
        answer = httpx.get(second_url + "/readyz")
        assert answer.status_code == 503 and answer.json()["status"] == "catching_up"
        assert metric(httpx.get(second_url + "/metrics").text, "orchestra_records_passes") == 0
    finally:
        for child in (first, second):
            if child is not None:
                child.kill()
                child.wait(10)
