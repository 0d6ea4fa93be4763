"""SIGTERM: clients are told the service restarts (1012), the process exits quickly, nothing is lost."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from orchestra_client import ConnectionRefused, GameClient, get_events, get_view
from tests.support.e2e import PERF, STRINGS, assert_clean_logs, expect_accepted, new_game
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

SERVICE_RESTART = 1012


async def sigterm(server: Any) -> float:
    """Send SIGTERM and wait (without blocking the loop) for the exit; the seconds it took."""
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    status = await asyncio.to_thread(server.process.wait, 15)
    assert status in (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM once it has shut down
    return time.monotonic() - started


async def close_code(client: GameClient, timeout: float = 10.0) -> int | None:
    """Wait for the session to end; the close code it ended with."""

    async def wait() -> int | None:
        while True:
            try:
                await client.next_frame(timeout)
            except ConnectionRefused as exc:
                return exc.code

    return await asyncio.wait_for(wait(), timeout)


async def test_sigterm_closes_every_client_with_1012_and_exits_within_seconds(start_server: Any) -> None:
    server = start_server()
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    players = [await GameClient.connect(server.url, game_id, t, reconnect=False) for t in tokens]
    watchers = [await GameClient.connect(server.url, game_id, reconnect=False) for _ in range(2)]
    clients = [*players, *watchers]
    try:
        expect_accepted(await players[0].place(PERF, "viola"))
        elapsed = await sigterm(server)
        codes = [await close_code(c) for c in clients]
        assert codes == [SERVICE_RESTART] * len(clients)
        assert elapsed < 10
    finally:
        for client in clients:
            await client.close()
    assert_clean_logs(server.logs())


async def test_every_command_acknowledged_before_sigterm_is_in_the_stream(start_server: Any) -> None:
    first = start_server()
    game_id, tokens = await new_game(first.url, ["Ada", "Ben"])
    players = [await GameClient.connect(first.url, game_id, t, reconnect=False) for t in tokens]
    acknowledged: list[dict[str, Any]] = []

    async def play(client: GameClient, token: dict[str, str], space: str) -> None:
        for n in range(1_000):
            try:
                answer = await client.place(token, space, id=f"s{client.seat}-{n}")
            except (ConnectionRefused, TimeoutError):
                return
            assert answer["type"] == "accepted", answer
            acknowledged.append(answer)

    playing = [
        asyncio.create_task(play(players[0], PERF, "viola")),
        asyncio.create_task(play(players[1], STRINGS, "cello")),
    ]
    try:
        await until(lambda: len(acknowledged) >= 20, 10, "20 acknowledged commands")
        elapsed = await sigterm(first)
        await asyncio.wait_for(asyncio.gather(*playing), 10)
    finally:
        for client in players:
            await client.close()
    assert elapsed < 10
    assert len(acknowledged) >= 20
    second = start_server()
    stream = await get_events(second.url, game_id)
    by_version = {e["version"]: e for e in stream}
    assert [e["version"] for e in stream] == list(range(1, len(stream) + 1))
    for answer in acknowledged:
        assert [by_version[e["version"]] for e in answer["events"]] == answer["events"]
        assert by_version[answer["version"]]["command_id"] == answer["id"]
    assert_clean_logs(first.logs())


def redis_children(pid: int) -> list[psutil.Process]:
    """The redis-server processes below `pid`."""
    return [p for p in psutil.Process(pid).children(recursive=True) if "redis" in p.name()]


async def gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether the process `pid` is gone (or a zombie nobody needs) within `timeout`."""

    def ended() -> bool:
        try:
            return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return True

    try:
        return await until(ended, timeout)
    except AssertionError:
        return False


async def test_the_embedded_redis_keeps_every_game_across_a_restart_and_stops_with_the_server(
    start_server: Any, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(redis_url=None, data_dir=data_dir)
    children = redis_children(first.process.pid)
    assert len(children) == 1
    game_id, tokens = await new_game(first.url, ["Ada", "Ben", "Cy"])
    async with await GameClient.connect(first.url, game_id, tokens[0], reconnect=False) as ada:
        for space in ("viola", "clarinet", "timpani"):
            expect_accepted(await ada.place(PERF, space))
        expect_accepted(await ada.end_game())
    events = await get_events(first.url, game_id)
    view = await get_view(first.url, game_id)
    assert len(events) == 5
    await sigterm(first)
    assert await gone(children[0].pid)

    second = start_server(redis_url=None, data_dir=data_dir)
    restarted = redis_children(second.process.pid)
    assert len(restarted) == 1
    assert await get_events(second.url, game_id) == events
    assert await get_view(second.url, game_id) == view
    await sigterm(second)
    assert await gone(restarted[0].pid)
    assert_clean_logs(first.logs() + second.logs())
