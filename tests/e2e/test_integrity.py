"""`orchestra verify` and `orchestra archive` against a real server and its Redis."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import redis
from support.e2e import new_game

from orchestra_client import GameClient, get_events

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
PERF = {"kind": "performance", "era": "classical"}


def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


async def _finished_game(url: str) -> str:
    game_id, tokens = await new_game(url, ["Ada", "Ben"])
    async with await GameClient.connect(url, game_id, tokens[0]) as ada:
        async with await GameClient.connect(url, game_id, tokens[1]) as ben:
            for space in ("viola", "clarinet", "timpani"):
                assert (await ada.place(PERF, space))["type"] == "accepted"
                assert (await ben.place(PERF, space))["type"] == "accepted"
            assert (await ben.place({"kind": "instrument", "instrument": "viola"}, "viola", skill=7))[
                "type"
            ] == "accepted"
            assert (await ada.end_game())["type"] == "accepted"
    return game_id


def _rewrite_stream(redis_url: str, game_id: str, version: int, change: dict[str, Any]) -> None:
    """Tamper with one stored envelope in place (the stream is rebuilt with the same ids)."""
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"orchestra:{{{game_id}}}:events"
        entries = client.xrange(key)
        client.delete(key)
        for entry_id, fields in entries:
            data = fields[b"e"]
            if entry_id == f"0-{version}".encode():
                raw = msgspec.json.decode(data)
                raw["event"].update(change)
                data = msgspec.json.encode(raw)
            client.xadd(key, {"e": data}, id=entry_id)
    finally:
        client.close()


async def test_verify_accepts_a_real_game_and_names_the_first_tampered_version(
    server: Any, redis_url: str
) -> None:
    game_id = await _finished_game(server.url)
    ok = await asyncio.to_thread(orchestra, "verify", game_id, "--server", server.url)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "verified" in ok.stdout and "live view matches" in ok.stdout
    _rewrite_stream(redis_url, game_id, 4, {"bonus": {"money": 40}})
    bad = await asyncio.to_thread(orchestra, "verify", game_id, "--server", server.url)
    assert bad.returncode == 1
    assert "INVALID at version 4" in bad.stdout


async def test_archive_writes_a_verified_file_then_deletes_the_game(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id = await _finished_game(server.url)
    stored = await get_events(server.url, game_id)
    out = tmp_path / "archive" / f"{game_id}.ndjson"
    keys = ("--data-dir", str(server.directory / "var"))  # the server's signing key, to verify with
    done = await asyncio.to_thread(
        orchestra, "archive", game_id, "--out", str(out), "--redis-url", redis_url, *keys
    )
    assert done.returncode == 0, done.stderr
    assert [msgspec.json.decode(line) for line in out.read_bytes().splitlines()[:-1]] == stored
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{game_id}")).status_code == 404
        listed = (await http.get("/games")).json()
    assert game_id not in [g["game_id"] for g in listed]


async def test_archive_refuses_a_game_that_has_not_ended_and_keeps_it(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id, _ = await new_game(server.url, ["Ada"])
    out = tmp_path / "live.ndjson"
    refused = await asyncio.to_thread(
        orchestra,
        "archive",
        game_id,
        "--out",
        str(out),
        "--redis-url",
        redis_url,
        "--data-dir",
        str(server.directory / "var"),
    )
    assert refused.returncode == 1 and "has not ended" in refused.stderr
    assert len(await get_events(server.url, game_id)) == 1
