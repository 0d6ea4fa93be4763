"""What an operator sees: /metrics series, command log lines, /healthz and /readyz as Redis comes and goes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from domain import legal_spaces
from domain.messages import Token
from orchestra_client import GameClient
from orchestra_client.bots import read_layout
from tests.support.e2e import PERF, STRINGS, eventually, log_lines, new_game, next_answer, stalled_spectator
from tests.support.redis import RedisProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
DEADLINE = 40.0


async def scrape(url: str) -> Samples:
    """GET /metrics, parsed: (sample name, sorted labels) -> value."""
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.get(f"{url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_count_commands_by_outcome_latency_connections_by_role_and_the_tail_lag(
    start_server: Callable[..., Any],
) -> None:
    server, other = start_server(log_level="debug"), start_server()  # accepted commands: debug lines
    async with asyncio.timeout(DEADLINE):
        game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
        layout = await read_layout(server.url, game_id)
        winds = msgspec.convert({"kind": "repair", "family": "winds"}, Token)
        illegal = next(s.id for s in layout.spaces if s.id not in legal_spaces(layout, winds))
        ada = await GameClient.connect(server.url, game_id, tokens[0], reconnect=False)
        ben = await GameClient.connect(server.url, game_id, tokens[1], reconnect=False)
        watchers = [await GameClient.connect(server.url, game_id, reconnect=False) for _ in range(3)]
        try:
            before = await scrape(server.url)
            assert value(before, "orchestra_connections", role="player") == 2
            assert value(before, "orchestra_connections", role="spectator") == 3
            for client, token in ((ada, PERF), (ben, STRINGS), (ada, STRINGS)):
                assert (await client.place(token, "viola"))["type"] == "accepted"
            assert (await ben.place({"kind": "repair", "family": "winds"}, illegal))[
                "code"
            ] == "illegal_space"
            assert (await watchers[0].place(PERF, "viola"))["code"] == "forbidden"
            assert (await ada.send({"type": "place", "token": PERF, "space": "nowhere"}))["code"] == (
                "bad_request"
            )
            await ada.send_raw(b"\x00binary")
            await ada.send_raw('{"type": "place", "id": "big", "pad": "' + "x" * 20_000 + '"}')
            codes = sorted([(await next_answer(ada))["code"], (await next_answer(ada))["code"]])
            assert codes == ["bad_request", "too_large"]
            # A command through the other node: this node's tail delivers it, and measures its lag.
            async with await GameClient.connect(other.url, game_id, tokens[1], reconnect=False) as far:
                answer = await far.place(PERF, "viola")
            await ada.wait_for_version(answer["version"])
            samples = await scrape(server.url)
        finally:
            for client in (ada, ben, *watchers):
                await client.close()

        assert value(samples, "orchestra_commands_total", outcome="accepted", code="") == 3
        rejections = {"illegal_space": 1, "forbidden": 1, "bad_request": 2, "too_large": 1}
        for code, count in rejections.items():
            assert value(samples, "orchestra_commands_total", outcome="rejected", code=code) == count
        assert value(samples, "orchestra_command_seconds_count") == 3
        assert value(samples, "orchestra_command_seconds_bucket", le="+Inf") == 3
        assert 0 < value(samples, "orchestra_command_seconds_sum") < 3
        buckets = [k for k in samples if k[0] == "orchestra_command_seconds_bucket"]
        assert len(buckets) > 5
        assert ("orchestra_tail_lag_seconds", ()) in samples
        assert 0 < value(samples, "orchestra_tail_lag_seconds") < 5
        assert value(samples, "orchestra_broadcast_drops_total") == 0
        assert value(samples, "orchestra_redis_errors_total") == 0
        assert value(samples, "orchestra_live_games") == 1

        async def all_gone() -> None:
            now = await scrape(server.url)
            assert value(now, "orchestra_connections", role="player") == 0
            assert value(now, "orchestra_connections", role="spectator") == 0

        await eventually(all_gone)

    lines = [line for line in log_lines(server.logs()) if str(line.get("msg", "")).startswith("command ")]
    assert {line["msg"] for line in lines} == {"command accepted", "command rejected"}
    for line in lines:
        assert {"game_id", "seat", "command_id", "version"} <= line.keys(), line
        assert line["game_id"] == game_id


async def test_a_spectator_that_never_reads_is_counted_as_a_broadcast_drop(
    start_server: Callable[..., Any],
) -> None:
    server = start_server(queue_limit=3, rate_per_second=100_000, rate_burst=100_000, max_placements=100_000)
    async with asyncio.timeout(DEADLINE):
        game_id, tokens = await new_game(server.url, ["Ada"])
        ada = await GameClient.connect(server.url, game_id, tokens[0], reconnect=False)
        slow = await stalled_spectator(server.url, game_id, close_timeout=1)
        try:
            drops, placed = 0.0, 0
            while not drops and placed < 2000:  # 25 commands in flight at a time, then a look at /metrics
                batch = [ada.place(PERF, ("viola", "clarinet", "timpani")[n % 3]) for n in range(25)]
                answers = await asyncio.gather(*batch)
                assert {a["type"] for a in answers} == {"accepted"}
                placed += len(answers)
                drops = value(await scrape(server.url), "orchestra_broadcast_drops_total")
            assert drops == 1
        finally:
            slow.transport.resume_reading()
            await slow.close()
            await ada.close()


@pytest.mark.logs_warnings  # Redis stopped under the server: it warns of the tail and the command lost
async def test_readyz_follows_redis_and_commands_count_redis_errors(
    start_server: Callable[..., Any], tmp_path: Path
) -> None:
    redis_server = RedisProcess(tmp_path / "redis").start()
    try:
        server = start_server(redis_url=redis_server.url, command_timeout=1.0)
        async with asyncio.timeout(DEADLINE), httpx.AsyncClient(base_url=server.url, timeout=5) as http:
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/readyz")).json() == {"status": "ok", "store": True, "tailer": True}
            game_id, tokens = await new_game(server.url, ["Ada"])
            async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
                assert (await ada.place(PERF, "viola", id="before"))["type"] == "accepted"
                redis_server.stop()
                answer = await ada.place(PERF, "viola", id="during")
                assert answer["code"] == "unavailable", answer
                ready = await http.get("/readyz")
                assert ready.status_code == 503 and ready.json()["store"] is False
                assert (await http.get("/healthz")).status_code == 200  # alive, only not ready
                samples = await scrape(server.url)
                assert value(samples, "orchestra_redis_errors_total") >= 1
                assert value(samples, "orchestra_commands_total", outcome="rejected", code="unavailable") == 1
            redis_server.start()  # the same port (an empty Redis: this one keeps no files)

            async def ready_again() -> None:
                assert (await http.get("/readyz")).status_code == 200

            await eventually(ready_again, timeout=10)
    finally:
        redis_server.stop()
    lines = [line for line in log_lines(server.logs()) if line.get("msg") == "command unavailable"]
    assert [line["command_id"] for line in lines] == ["during"]
    assert {"game_id", "seat", "command_id", "version", "code"} <= lines[0].keys()
