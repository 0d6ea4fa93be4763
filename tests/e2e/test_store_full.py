"""A full embedded Redis (ORCHESTRA_EMBEDDED_REDIS_MAXMEMORY reached, noeviction): what clients and an
operator see. New games get `507 store_full`, commands a `store_full` rejection, reads still work, and
writes work again once there is room; /metrics and the log name the redis-server that runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from orchestra_client import GameClient
from server.ops.embedded_redis import PASSWORD_NAME, URL_NAME
from server.ops.redis_binary import find
from tests.support.e2e import PERF, expect_accepted, log_lines, new_game
from tests.support.logs import logged

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


async def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics: (sample name, sorted labels) -> value."""
    async with httpx.AsyncClient(timeout=10) as http:
        text = (await http.get(f"{url}/metrics")).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def post_game(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(f"{url}/games", json={"players": ["Ada", "Ben", "Cy"]})


@pytest.mark.logs_warnings  # a command refused as the store is full is logged at warning
async def test_a_full_embedded_redis_refuses_writes_as_store_full_and_recovers_when_room_is_made(
    start_server: Any, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(redis_url=None, data_dir=data_dir)
    game_id, tokens = await new_game(first.url, ["Ada", "Ben", "Cy"])
    passwords = [(data_dir / PASSWORD_NAME).read_text().strip()]
    assert await asyncio.to_thread(first.terminate) in (0, -15)

    # Restarted with a limit below what its games already take: Redis is full from the start.
    second = start_server(redis_url=None, data_dir=data_dir, embedded_redis_maxmemory="100kb")
    url = (data_dir / URL_NAME).read_text().strip()
    operator = aioredis.Redis.from_url(url)
    try:
        config = await operator.config_get("maxmemory*")
        assert (config["maxmemory"], config["maxmemory-policy"]) == (str(100 * 1024), "noeviction")

        refused = await post_game(second.url)
        assert refused.status_code == 507
        assert refused.json()["code"] == "store_full"

        async with await GameClient.connect(second.url, game_id, tokens[0], reconnect=False) as ada:
            answer = await ada.place(PERF, "viola", id="full-1")
            assert (answer["type"], answer["id"], answer["code"], answer["version"]) == (
                "rejected",
                "full-1",
                "store_full",
                1,
            )
            async with httpx.AsyncClient(timeout=10) as http:  # reads and readiness are unaffected
                assert (await http.get(f"{second.url}/games/{game_id}")).json()["version"] == 1
                assert (await http.get(f"{second.url}/readyz")).status_code == 200
            samples = await scrape(second.url)
            assert value(samples, "orchestra_commands_total", outcome="rejected", code="store_full") == 1

            # Room made (here the limit raised at once, as an operator can): writes work again, and the
            # refused command retried with its id is taken.
            await operator.config_set("maxmemory", "1gb")
            expect_accepted(await ada.place(PERF, "viola", id="full-1"))
        assert (await post_game(second.url)).status_code == 201
    finally:
        await operator.aclose()

    chosen = find()
    assert value(samples, "orchestra_redis_info", version=chosen.version_text, embedded="true") == 1
    assert logged(second.logs(), "command refused: the store is full", game_id=game_id, command_id="full-1")
    started = [line for line in log_lines(second.logs()) if line["msg"] == "embedded redis started"]
    assert len(started) == 1
    assert (started[0]["binary"], started[0]["redis_version"]) == (chosen.path, chosen.version_text)
    assert started[0]["level"] == "info"
    passwords.append((data_dir / PASSWORD_NAME).read_text().strip())
    assert not [p for p in passwords if p in first.logs() + second.logs()]


async def test_metrics_name_the_version_of_a_redis_given_by_url(start_server: Any, redis_url: str) -> None:
    server = start_server()
    client = aioredis.Redis.from_url(redis_url)
    try:
        version = (await client.info("server"))["redis_version"]
    finally:
        await client.aclose()
    samples = await scrape(server.url)
    assert value(samples, "orchestra_redis_info", version=str(version), embedded="false") == 1
