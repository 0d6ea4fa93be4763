"""Faults: Redis restarted or frozen mid-game, and a server killed between its append and its broadcast.

In each, commands during the fault are answered promptly (`unavailable`, never a hang), tails and clients
recover by themselves, and every acknowledged command is in the stream exactly once; an unavailable
command re-sent with its id after recovery is applied exactly once.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil
import pytest

from orchestra_client import ConnectionRefused, GameClient
from tests.support.redis import RedisProcess
from tests.support.reliability import (
    assert_each_applied_once,
    new_game,
    placement,
    stream_of,
    timed_send,
    wait_ready,
)
from tests.support.waiting import until

# Each test breaks the store on purpose, and the server says so in its log.
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.logs_warnings]

TIMEOUT = 1.0  # the servers' command_timeout here
PROMPT = TIMEOUT + 1.0  # the bound on any answer during a fault


class Table:
    """Two players and a spectator on one game, all following it from version 0."""

    def __init__(self, url: str, game_id: str, players: list[GameClient], watcher: GameClient) -> None:
        self.url, self.game_id, self.players, self.watcher = url, game_id, players, watcher
        self.rng = random.Random(11)
        self.accepted: dict[tuple[int, str], int] = {}
        self.unavailable: list[tuple[GameClient, dict[str, Any]]] = []
        self.count = 0

    @classmethod
    async def open(cls, url: str) -> Table:
        game_id, tokens = await new_game(url, ["Ada", "Ben"])
        players = [await GameClient.connect(url, game_id, t, since=0) for t in tokens]
        watcher = await GameClient.connect(url, game_id, None, since=0)
        return cls(url, game_id, players, watcher)

    async def play(self, client: GameClient, *, during_fault: bool = False) -> dict[str, Any]:
        """One legal placement; records its outcome. During a fault, the answer must come promptly."""
        self.count += 1
        frame = placement(self.rng, f"r-{self.count}")
        answer, seconds = await timed_send(client, frame)
        if during_fault:
            assert seconds < PROMPT, f"answered in {seconds:.2f}s during the fault"
        self.record(client, frame, answer)
        return dict(answer)

    def record(self, client: GameClient, frame: dict[str, Any], answer: dict[str, Any]) -> None:
        assert answer["id"] == frame["id"]
        if answer["type"] == "accepted":
            key = (client.seat or 0, frame["id"])
            assert self.accepted.setdefault(key, answer["version"]) == answer["version"]
        else:
            assert answer["code"] == "unavailable", answer
            self.unavailable.append((client, frame))

    async def resend_unavailable(self) -> None:
        """Each command that was unavailable, sent again with its id: accepted, then the same again."""
        for client, frame in self.unavailable:
            first = await client.send(frame)
            assert first["type"] == "accepted", first
            self.record(client, frame, first)
            again = await client.send(frame)
            assert (again["type"], again["version"], again["events"]) == (
                "accepted",
                first["version"],
                first["events"],
            )
        self.unavailable.clear()

    async def check(self) -> list[dict[str, Any]]:
        """The stream holds exactly the accepted commands; every client's history equals it."""
        stream = await stream_of(self.url, self.game_id)
        assert_each_applied_once(stream, self.accepted)
        for client in (*self.players, self.watcher):
            await client.wait_for_version(len(stream), timeout=15)
            assert client.envelopes == stream
        return stream

    async def close(self) -> None:
        for client in (*self.players, self.watcher):
            await client.close()


async def test_an_external_redis_restarted_mid_game_loses_and_doubles_nothing(
    start_server: Callable[..., Any], redis_process: RedisProcess
) -> None:
    server = start_server(redis_process.url, command_timeout=TIMEOUT)
    table = await Table.open(server.url)
    try:
        for client in table.players * 2:
            assert (await table.play(client))["type"] == "accepted"
        await asyncio.to_thread(redis_process.stop)
        for client in table.players * 2:
            answer = await table.play(client, during_fault=True)
            assert (answer["type"], answer["code"]) == ("rejected", "unavailable")
        await asyncio.to_thread(redis_process.start)  # the same port, the AOF brings the data back
        await wait_ready(server.url)
        await table.resend_unavailable()
        for client in table.players:
            assert (await table.play(client))["type"] == "accepted"
        stream = await table.check()
        assert len(stream) == 1 + 10
        assert all(client.reconnects == 0 for client in (*table.players, table.watcher))
    finally:
        await table.close()
    assert "Traceback" not in server.logs()


def _redis_child(server_pid: int) -> psutil.Process:
    children = [p for p in psutil.Process(server_pid).children() if "redis-server" in p.name()]
    assert len(children) == 1, children
    return children[0]


async def test_the_embedded_redis_killed_is_restarted_and_play_resumes_exactly_once(
    start_server: Callable[..., Any],
) -> None:
    server = start_server(None, command_timeout=TIMEOUT)
    table = await Table.open(server.url)
    try:
        for client in table.players:
            assert (await table.play(client))["type"] == "accepted"
        child = _redis_child(server.process.pid)
        child.kill()  # SIGKILL: nothing flushed beyond the AOF written with every command

        async def accepted() -> bool:  # play on through the outage until the new redis-server answers
            return bool((await table.play(table.players[0], during_fault=True))["type"] == "accepted")

        await until(accepted, 20, "a command accepted by a restarted redis-server", interval=0.05)
        assert table.unavailable, "no command met the outage"
        assert _redis_child(server.process.pid).pid != child.pid
        await wait_ready(server.url)
        await table.resend_unavailable()
        assert (await table.play(table.players[1]))["type"] == "accepted"
        await table.check()
    finally:
        await table.close()
    logs = server.logs()
    assert "embedded redis-server exited" in logs and "Traceback" not in logs


async def test_a_frozen_redis_gets_unavailable_answers_in_time_and_never_blocks_the_loop(
    start_server: Callable[..., Any], redis_process: RedisProcess
) -> None:
    server = start_server(redis_process.url, command_timeout=TIMEOUT)
    table = await Table.open(server.url)
    assert redis_process.process is not None
    pid = redis_process.process.pid
    health: list[float] = []

    async def probe_health(http: httpx.AsyncClient, until: float) -> None:
        while time.monotonic() < until:
            began = time.monotonic()
            assert (await http.get("/healthz")).status_code == 200
            health.append(time.monotonic() - began)
            await asyncio.sleep(0.05)  # a probe every so often, as an orchestrator's

    try:
        for client in table.players:
            assert (await table.play(client))["type"] == "accepted"
        os.kill(pid, signal.SIGSTOP)
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
                prober = asyncio.create_task(probe_health(http, time.monotonic() + 3.0))
                for client in table.players:
                    answer = await table.play(client, during_fault=True)
                    assert (answer["type"], answer["code"]) == ("rejected", "unavailable")
                await prober
        finally:
            os.kill(pid, signal.SIGCONT)
        assert len(health) >= 10 and max(health) < 0.5, health
        await wait_ready(server.url)
        # A frozen append may still run once Redis wakes: the re-send then returns its first outcome.
        await table.resend_unavailable()
        for client in table.players:
            assert (await table.play(client))["type"] == "accepted"
        await table.check()
    finally:
        await table.close()
    assert "Traceback" not in server.logs()


async def test_a_node_killed_between_append_and_broadcast_leaves_the_command_for_the_survivor(
    start_server: Callable[..., Any], redis_process: RedisProcess
) -> None:
    doomed = start_server(redis_process.url, crash_after_append=True)
    survivor = start_server(redis_process.url)
    game_id, tokens = await new_game(survivor.url, ["Ada", "Ben"])
    ada = await GameClient.connect(doomed.url, game_id, tokens[0], since=0, reconnect=False)
    watcher_doomed = await GameClient.connect(doomed.url, game_id, None, since=0, reconnect=False)
    ben = await GameClient.connect(survivor.url, game_id, tokens[1], since=0)
    watcher = await GameClient.connect(survivor.url, game_id, None, since=0)
    resumed: list[GameClient] = []
    try:
        frame = placement(random.Random(5), "fatal-1")
        with pytest.raises(ConnectionRefused):
            await ada.send(frame)
        assert await asyncio.to_thread(doomed.process.wait, 10) == 3
        stream = await stream_of(survivor.url, game_id)
        assert [(e["command_id"], e["seat"]) for e in stream[1:]] == [("fatal-1", 0)]
        await watcher.wait_for_version(2)
        assert watcher.envelopes == stream
        for lost in (ada, watcher_doomed):
            # The doomed node's own tail may have delivered the envelope in the instant before the exit.
            assert lost.envelopes in (stream[:1], stream)
            back = await GameClient.connect(survivor.url, game_id, lost.token, since=lost.version)
            resumed.append(back)
            await back.wait_for_version(2)
            assert lost.envelopes + back.envelopes == stream  # each envelope once, across the two nodes
        answer = await resumed[0].send(frame)
        assert (answer["type"], answer["version"]) == ("accepted", 2)
        assert [e["command_id"] for e in answer["events"]] == ["fatal-1"]
        assert (await ben.send(placement(random.Random(6), "after-1")))["version"] == 3
        final = await stream_of(survivor.url, game_id)
        assert [e["command_id"] for e in final[1:]] == ["fatal-1", "after-1"]
        for client in (ben, watcher, *resumed):
            await client.wait_for_version(3)
        assert ben.envelopes == watcher.envelopes == final
        assert ada.envelopes + resumed[0].envelopes == final
    finally:
        for client in (ada, watcher_doomed, ben, watcher, *resumed):
            await client.close()
    assert "Traceback" not in survivor.logs()
