"""The projector's status: /readyz is 200 once caught up (503 before, and while it waits for the lease),
/metrics shows its lag and counts damaged games; a projector that lags behind new games catches up."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import redis

from server.records.database import GameQuery, SqlRecords, sqlite_records
from server.store.redis.keys import GAMES_KEY, events_key
from tests.records.games import events, play, stored
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


def write_stream(url: str, game_id: str, lines: list[bytes]) -> None:
    """Store `lines` as a game's stream, as the server stores envelopes (whoever writes Redis could)."""
    client = redis.Redis.from_url(url)
    try:
        for version, data in enumerate(lines, 1):
            client.xadd(events_key(game_id), {"e": data}, id=f"0-{version}")
        client.zadd(GAMES_KEY, {game_id: time.time()}, nx=True)
    finally:
        client.close()


async def test_a_damaged_game_is_counted_once_in_metrics_and_logged_once(
    own_redis: RedisProcess, tmp_path: Path
) -> None:
    for game_id in ("sound", "hurt"):
        log, _ = events(play(random.Random(8), game_id))
        lines = stored(game_id, log)
        if game_id == "hurt":
            lines[2] = b'{"not": "an envelope"}'
        write_stream(own_redis.url, game_id, lines)
    log_path, path = tmp_path / "projector.log", tmp_path / "records.sqlite3"
    child = projector(own_redis.url, f"sqlite:///{path}", log_path, "--port", "0")
    try:
        url = status_url(log_path)
        await eventually(ready(url), timeout=30)  # a damaged game does not hold readiness back

        def passes(n: int) -> Callable[[], None]:
            def check() -> None:
                assert metric(httpx.get(url + "/metrics").text, "orchestra_records_passes") >= n

            return check

        await eventually(passes(5), timeout=30)
        text = httpx.get(url + "/metrics").text
        assert metric(text, "orchestra_records_damaged_games_total") == 1
        assert "# HELP orchestra_records_damaged_games_total Games whose stream" in text
        assert "# TYPE orchestra_records_damaged_games_total counter" in text
        said = [line for line in log_path.read_text().splitlines() if "cannot be folded" in line]
        assert len(said) == 1 and "game hurt cannot be folded at version 3" in said[0], said
        assert "does not decode" in said[0]
        database = sqlite_records(path)
        try:
            assert [g.game_id for g in database.games(GameQuery(shown=("sound", "hurt")))] == ["sound"]
            assert database.positions()["hurt"].version == 2  # what came before is kept
        finally:
            database.close()
    finally:
        child.kill()
        child.wait(10)
