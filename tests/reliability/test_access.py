"""Access, beyond tests/e2e/test_http.py and test_logs.py: seat tokens bound to their seat and game across
HTTP and websocket, private games through the CLI, the API key as no credential, and no token in Redis,
metrics, CLI output or archives."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from orchestra_client import ConnectionRefused, GameClient, create_game
from tests.support.redis import RedisProcess
from tests.support.reliability import placement

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def refused(url: str, game_id: str, token: str | None) -> dict[str, Any]:
    """Connect with `token`; the refusal frame (the session must be closed with 1008)."""
    with pytest.raises(ConnectionRefused) as caught:
        await GameClient.connect(url, game_id, token, reconnect=False)
    assert caught.value.code == 1008 and caught.value.frame is not None
    return caught.value.frame


async def test_a_seat_token_is_its_own_seat_in_its_own_game_only(module_server: Any) -> None:
    url = module_server.url
    one = await create_game(url, ["Ada", "Ben", "Cy"], spectators="token")
    two = await create_game(url, ["Dee", "Eve"], spectators="token")
    rng = random.Random(3)
    for seat, entry in enumerate(one["seats"]):
        async with await GameClient.connect(url, one["game_id"], entry["token"], since=0) as player:
            assert (player.welcome["role"], player.seat) == ("player", seat)
            answer = await player.send(placement(rng, f"s-{seat}"))
            assert [e["seat"] for e in answer["events"]] == [seat]
            other = (seat + 1) % 3  # naming another seat in the frame is no way to act as it
            spoofed = await player.send({**placement(rng, f"x-{seat}"), "seat": other})
            assert (spoofed["type"], spoofed["code"]) == ("rejected", "bad_request")
    # Every token of game one (seats and watch) is a stranger to game two, over websocket and HTTP.
    strangers = [s["token"] for s in one["seats"]] + [one["watch_token"]]
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        for token in strangers:
            frame = await refused(url, two["game_id"], token)
            assert (frame["code"], frame["id"]) == ("forbidden", None)
            for path in ("", "/events", "?at=1"):
                response = await http.get(f"/games/{two['game_id']}{path}", headers=bearer(token))
                assert response.status_code == 403 and response.json()["code"] == "forbidden"
                assert token not in response.text
        # The watch token reads, and watches, but cannot command.
        assert (
            await http.get(f"/games/{one['game_id']}?at=2", headers=bearer(one["watch_token"]))
        ).is_success
    async with await GameClient.connect(url, one["game_id"], one["watch_token"]) as watcher:
        assert watcher.welcome["role"] == "spectator"
        answer = await watcher.send({"type": "end_game", "id": "w-1"})
        assert (answer["code"], answer["id"]) == ("forbidden", "w-1")


async def test_the_cli_reads_a_private_game_only_with_a_token(module_server: Any) -> None:
    url = module_server.url
    created = await create_game(url, ["Ada"], spectators="token")
    game_id, watch = created["game_id"], created["watch_token"]
    for command in (["export", game_id], ["replay", game_id, "--at", "1"], ["verify", game_id]):
        denied = await asyncio.to_thread(orchestra, *command, "--server", url)
        assert denied.returncode != 0 and watch not in denied.stdout + denied.stderr
        allowed = await asyncio.to_thread(orchestra, *command, "--server", url, "--token", watch)
        assert allowed.returncode == 0, allowed.stderr
        assert watch not in allowed.stdout + allowed.stderr


async def test_the_api_key_guards_creation_only_and_is_no_seat_or_watch_credential(
    start_server: Any, redis_process: RedisProcess
) -> None:
    key = "k-" + "s3cr3t" * 6
    server = start_server(redis_process.url, api_key=key)
    created = await create_game(server.url, ["Ada"], spectators="token", api_key=key)
    game_id = created["game_id"]
    frame = await refused(server.url, game_id, key)
    assert frame["code"] == "forbidden"
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.get(f"/games/{game_id}", headers=bearer(key))).status_code == 403
    async with await GameClient.connect(server.url, game_id, created["seats"][0]["token"]) as ada:
        assert (await ada.send(placement(random.Random(1), "k-1")))["type"] == "accepted"
    assert key not in server.logs()


async def test_no_token_reaches_redis_metrics_lists_cli_output_or_archives(
    start_server: Any, redis_process: RedisProcess, tmp_path: Path
) -> None:
    server = start_server(redis_process.url)
    url = server.url
    private = await create_game(url, ["Ada", "Ben"], spectators="token")
    public = await create_game(url, ["Cy"])
    game_id = private["game_id"]
    tokens = [s["token"] for s in private["seats"] + public["seats"]] + [private["watch_token"]]
    seen: list[str] = []
    rng = random.Random(8)
    ada_token, ben_token = (s["token"] for s in private["seats"])
    async with await GameClient.connect(url, game_id, ada_token, since=0) as ada:
        async with await GameClient.connect(url, game_id, ben_token, since=0) as ben:
            for turn in range(3):
                for player in (ada, ben):
                    await player.send(placement(rng, f"t-{turn}"))
            # Hostile frames carrying a token where a value goes: the answers must not echo it.
            await ada.send({**placement(rng, "bad-1"), "space": ben_token})
            await ada.send({**placement(rng, "bad-2"), "token": {"kind": ben_token}})
            await ada.send({**placement(rng, "bad-3"), ben_token: 1})
            assert (await ada.end_game())["type"] == "accepted"
            await ben.wait_for_version(ada.version)
            # A rejection may quote the sender's own frame back to the sender alone (Ada wrote Ben's token
            # there herself): those answers are left out; every other frame of both players is scanned.
            echoes = [f for f in ada.received if str(f.get("id", "")).startswith("bad-")]
            assert len(echoes) == 3 and all(f["type"] == "rejected" for f in echoes)
            seen += [repr(f) for client in (ada, ben) for f in client.received if f not in echoes]
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        for path in (
            "/metrics",
            "/games",
            f"/games/{public['game_id']}",
            f"/games/{public['game_id']}/events",
        ):
            seen.append((await http.get(path)).text)
        for path in (f"/games/{game_id}", f"/games/{game_id}/events", f"/games/{game_id}?at=3"):
            seen.append((await http.get(path, headers=bearer(private["watch_token"]))).text)
            seen.append((await http.get(path, headers=bearer(public["seats"][0]["token"]))).text)
    watch = private["watch_token"]
    for command in (["export", game_id], ["verify", game_id], ["replay", game_id, "--at", "2"]):
        done = await asyncio.to_thread(orchestra, *command, "--server", url, "--token", watch)
        seen += [done.stdout, done.stderr]
    client = redis.Redis.from_url(redis_process.url)
    try:
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            if kind == b"stream":
                seen.append(repr(client.xrange(key)))
            elif kind == b"hash":
                seen.append(repr(client.hgetall(key)))
            elif kind == b"zset":
                seen.append(repr(client.zrange(key, 0, -1)))
            else:
                seen.append(repr(client.dump(key)))
    finally:
        client.close()
    archive = tmp_path / "private.ndjson"
    keys = ("--data-dir", str(server.directory / "var"))  # the server's signing key
    kept = await asyncio.to_thread(
        orchestra, "archive", game_id, "--out", str(archive), "--redis-url", redis_process.url, *keys
    )
    assert kept.returncode == 0, kept.stderr
    seen += [kept.stdout, kept.stderr, archive.read_text(), server.logs()]
    everything = "\n".join(seen)
    assert len(everything) > 20_000
    for token in tokens:
        assert token not in everything
        assert token[:12] not in everything
