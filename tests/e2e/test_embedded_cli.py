"""`orchestra archive --data-dir` reaches the embedded Redis: the running server's through its 0600
`redis.url` (socket and password), or one of its own when the server is stopped."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestra_client import GameClient
from server.ops.embedded_redis import PASSWORD_NAME, URL_NAME
from tests.support.e2e import PERF, expect_accepted, new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def archived_versions(path: Path) -> list[int]:
    """The versions of the envelopes an archive file holds (any other line, a trailer say, aside)."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [record["version"] for record in records if "event" in record]


async def ended_game(url: str) -> str:
    game_id, tokens = await new_game(url, ["Ada", "Ben"])
    async with await GameClient.connect(url, game_id, tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
        expect_accepted(await ada.end_game())
    return game_id


async def test_archive_by_data_dir_works_while_the_server_runs_and_after_it_stopped(
    start_server: Any, tmp_path: Path
) -> None:
    # A data dir too long for a socket path: the socket and its URL live elsewhere.
    data_dir = tmp_path / ("d" * 60) / ("e" * 60)
    server = start_server(redis_url=None, data_dir=data_dir)
    first, second = await ended_game(server.url), await ended_game(server.url)
    assert "unix://:" in (data_dir / URL_NAME).read_text()

    done = await asyncio.to_thread(
        orchestra, "archive", first, "--out", str(tmp_path / "first.ndjson"), "--data-dir", str(data_dir)
    )
    assert done.returncode == 0, done.stderr
    assert archived_versions(tmp_path / "first.ndjson") == [1, 2, 3]
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{first}")).status_code == 404

    assert await asyncio.to_thread(server.terminate) in (0, -15)
    assert not (data_dir / URL_NAME).exists() and not (data_dir / PASSWORD_NAME).exists()
    done = await asyncio.to_thread(
        orchestra, "archive", second, "--out", str(tmp_path / "second.ndjson"), "--data-dir", str(data_dir)
    )
    assert done.returncode == 0, done.stderr
    assert archived_versions(tmp_path / "second.ndjson") == [1, 2, 3]
    assert not (data_dir / URL_NAME).exists()  # the archive's own Redis is gone with it
