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

from orchestra_client import GameClient, get_events
from tests.support.e2e import new_game
from tests.support.redis import rewrite_stored
from tests.support.waiting import until

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

    def changed(data: bytes) -> bytes:
        raw = msgspec.json.decode(data)
        raw["event"].update(change)
        return msgspec.json.encode(raw)

    rewrite_stored(redis_url, game_id, version, changed)


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


async def _play_until_refused(client: GameClient, accepted: list[int], refusals: list[str]) -> None:
    """Place until a placement is refused; the versions accepted and the refusal's code."""
    spaces = ["violin_bc", "viola", "violin_cr", "clarinet", "timpani"]
    for n in range(200):
        answer = await client.place(PERF, spaces[n % len(spaces)], id=f"t{client.seat}-{n}")
        if answer["type"] != "accepted":
            refusals.append(answer["code"])
            return
        accepted.append(answer["version"])


async def test_archive_force_fences_the_game_so_no_acknowledged_command_is_lost(
    start_server: Any, redis_url: str, tmp_path: Path
) -> None:
    # archive --force of a game in play: every command accepted is in the file, and every command after
    # the fence is refused `archiving` (then `unknown_game` once the game is gone); none is lost. The
    # players place as fast as the server answers: on a fast machine the default rate limit would refuse
    # them first.
    server = start_server(rate_per_second=100_000, rate_burst=100_000)
    from server.config import from_env
    from server.ops import signing_keys
    from server.ops.archive import archive
    from server.store.redis import RedisEventStore

    settings = from_env({}, data_dir=str(server.directory / "var"))
    keys = signing_keys.keyring(settings, signing_keys.load_signer(settings, create=False))
    store = await RedisEventStore.from_url(redis_url)
    try:
        for trial in range(8):
            game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
            accepted: list[int] = []
            refusals: list[str] = []
            clients = [await GameClient.connect(server.url, game_id, t, reconnect=False) for t in tokens]

            playing = [asyncio.create_task(_play_until_refused(c, accepted, refusals)) for c in clients]
            # The archive lands at a different point each trial: after more accepted commands each time.
            await until(lambda: len(accepted) > 2 * trial, 10, "the commands before the archive")  # noqa: B023
            out = tmp_path / f"{game_id}.ndjson"
            done = await archive(store, game_id, out, keys=keys, force=True)
            await asyncio.wait_for(asyncio.gather(*playing), 20)
            for client in clients:
                await client.close()
            archived = {msgspec.json.decode(line).get("version") for line in out.read_bytes().splitlines()}
            assert accepted and set(accepted) <= archived, f"trial {trial}: an accepted command is missing"
            assert max(accepted) <= done.envelopes
            assert set(refusals) <= {"archiving", "unknown_game"} and refusals, refusals
            assert await store.version(game_id) == 0
    finally:
        await store.close()


async def test_an_archive_that_fails_lifts_its_fence(server: Any, redis_url: str, tmp_path: Path) -> None:
    from server.engine.signing import Keyring
    from server.ops.archive import ArchiveError, archive
    from server.store.redis import RedisEventStore

    game_id, tokens = await new_game(server.url, ["Ada"])
    store = await RedisEventStore.from_url(redis_url)
    try:
        with pytest.raises(ArchiveError, match="has not ended"):
            await archive(store, game_id, tmp_path / "x.ndjson", keys=Keyring([]))
    finally:
        await store.close()
    async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
        assert (await ada.place(PERF, "viola"))["type"] == "accepted"


async def test_archiving_a_game_whose_delete_stopped_halfway_removes_what_the_index_still_holds(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    from server.engine.signing import Keyring
    from server.ops.archive import ArchiveError, archive
    from server.store.redis import RedisEventStore
    from server.store.redis.keys import LIVE_KEY, PUBLIC_KEY, auth_key, commands_key, events_key

    game_id, _ = await new_game(server.url, ["Ada"])
    raw = redis.Redis.from_url(redis_url)
    store = await RedisEventStore.from_url(redis_url)
    try:
        # The game's keys gone, its index entries left: a delete stopped between its two calls.
        raw.delete(events_key(game_id), auth_key(game_id), commands_key(game_id))
        assert raw.sismember(LIVE_KEY, game_id) and raw.zscore(PUBLIC_KEY, game_id) is not None
        with pytest.raises(ArchiveError, match="no game"):
            await archive(store, game_id, tmp_path / "x.ndjson", keys=Keyring([]))
        assert not raw.sismember(LIVE_KEY, game_id) and raw.zscore(PUBLIC_KEY, game_id) is None
        assert not (tmp_path / "x.ndjson").exists()
    finally:
        await store.close()
        raw.close()
