"""Retired signing keys against a real server, its redis-server and the real CLI: a key copied before its
rotation forges neither a whole game (`verify --file`, `import`) nor an envelope appended after the new
key's (online `verify`); an archive the old key signed before its retirement imports only when the
operator vouches for it (`--allow-retired-before`)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import msgspec
import pytest
import redis

from orchestra_client import GameClient
from orchestra_client.session import ConnectionRefused
from server.clock import utc_now
from server.engine.signing import Signer
from tests.support.e2e import PERF, expect_accepted, new_game
from tests.support.forgery import fold, forged_game, placement, sealed

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(orchestra, *args)


def _events_key(game_id: str) -> str:
    return f"orchestra:{{{game_id}}}:events"


def stored(redis_url: str, game_id: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(_events_key(game_id)))
        return [fields[b"e"] for _, fields in entries]
    finally:
        client.close()


async def place(
    url: str, game_id: str, tokens: list[str], spaces: tuple[str, ...], end: bool = False
) -> None:
    async with await GameClient.connect(url, game_id, tokens[0], reconnect=False) as ada:
        async with await GameClient.connect(url, game_id, tokens[1], reconnect=False) as ben:
            for space in spaces:
                expect_accepted(await ada.place(PERF, space))
                expect_accepted(await ben.place(PERF, space))
            if end:
                expect_accepted(await ada.end_game())


async def rotated(
    start_server: Callable[..., Any], data_dir: Path, first: Any
) -> tuple[Signer, datetime, Any]:
    """Copy the key of `first` (as a thief would), stop it, rotate its key with the CLI and start a node
    on the new key: the copy, the retirement time the CLI recorded, and the new node."""
    stolen = Signer.from_text((data_dir / "signing.key").read_bytes())
    first.stop()
    done = await cli("signing-key", "--rotate", "--data-dir", str(data_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    async with httpx.AsyncClient(base_url=(second := start_server(data_dir=str(data_dir))).url) as http:
        listed = (await http.get("/signing-keys")).json()
    (old,) = [key for key in listed["keys"] if key["id"] == stolen.key_id]
    assert old["status"] == "retired" and old["retired_at"], listed
    return stolen, datetime.fromisoformat(old["retired_at"]), second


def _at(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def test_a_whole_game_forged_with_a_key_copied_before_its_rotation_is_refused(
    start_server: Callable[..., Any], redis_url: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir=str(data_dir))
    stolen, retired_at, node = await rotated(start_server, data_dir, first)
    keys = ("--data-dir", str(data_dir))

    # Dated when it was forged, after the rotation: the copy verifies nothing of that time.
    lines, tokens = forged_game(stolen, utc_now())
    forged = tmp_path / "forged.ndjson"
    forged.write_bytes(b"\n".join(lines) + b"\n")
    checked = await cli("verify", "--file", str(forged), *keys)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "INVALID at version 1: " in checked.stdout and f"key {stolen.key_id}" in checked.stdout
    assert "retired" in checked.stdout
    imported = await cli("import", str(forged), "--redis-url", redis_url, *keys)
    assert imported.returncode == 1 and "INVALID at version 1" in imported.stdout + imported.stderr
    game_id = msgspec.json.decode(lines[0])["game_id"]
    async with httpx.AsyncClient(base_url=node.url) as http:
        assert (await http.get(f"/games/{game_id}")).status_code == 404
        assert game_id not in (await http.get("/games")).text
    with pytest.raises(ConnectionRefused, match="no such game"):
        await GameClient.connect(node.url, game_id, tokens[0], reconnect=False)

    # Dated before the retirement: its signatures are the old key's, which the file cannot disprove; an
    # import takes it only when the operator vouches for what the old key signed before a date.
    lines, _ = forged_game(stolen, _at(retired_at - timedelta(days=30)))
    forged.write_bytes(b"\n".join(lines) + b"\n")
    checked = await cli("verify", "--file", str(forged), *keys)
    assert checked.returncode == 0 and f"signed by the retired key {stolen.key_id}" in checked.stdout
    refused = await cli("import", str(forged), "--redis-url", redis_url, *keys)
    assert refused.returncode == 1 and "--allow-retired-before" in refused.stdout + refused.stderr
    vouched = _at(retired_at - timedelta(days=60))
    refused = await cli(
        "import", str(forged), "--redis-url", redis_url, *keys, "--allow-retired-before", vouched
    )
    assert refused.returncode == 1 and "INVALID at version 1" in refused.stdout + refused.stderr
    assert stored(redis_url, msgspec.json.decode(lines[0])["game_id"]) == []


async def test_an_archive_signed_before_the_rotation_imports_when_the_operator_vouches_for_it(
    start_server: Callable[..., Any], redis_url: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir=str(data_dir))
    game_id, tokens = await new_game(first.url, ["Ada", "Ben"])
    await place(first.url, game_id, tokens, ("viola",), end=True)
    archive = tmp_path / f"{game_id}.ndjson"
    keys = ("--redis-url", redis_url, "--data-dir", str(data_dir))
    done = await cli("archive", game_id, "--out", str(archive), *keys)
    assert done.returncode == 0, done.stdout + done.stderr
    _, retired_at, node = await rotated(start_server, data_dir, first)

    refused = await cli("import", str(archive), *keys)
    assert refused.returncode == 1 and "--allow-retired-before" in refused.stdout + refused.stderr
    assert stored(redis_url, game_id) == []
    early = await cli("import", str(archive), *keys, "--allow-retired-before", "2000-01-01")
    assert early.returncode == 1 and "INVALID at version 1" in early.stdout + early.stderr
    taken = await cli("import", str(archive), *keys, "--allow-retired-before", _at(retired_at))
    assert taken.returncode == 0, taken.stdout + taken.stderr
    async with httpx.AsyncClient(base_url=node.url) as http:
        assert (await http.get(f"/games/{game_id}")).json()["ended"] is True


@pytest.mark.logs_warnings  # the forged line is written over: the node reads the game again, warning so
async def test_an_envelope_of_the_retired_key_after_the_new_keys_fails_online_verify(
    start_server: Callable[..., Any], redis_url: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir=str(data_dir))
    game_id, tokens = await new_game(first.url, ["Ada", "Ben"])
    await place(first.url, game_id, tokens, ("viola",))
    stolen, retired_at, node = await rotated(start_server, data_dir, first)
    await place(node.url, game_id, tokens, ("clarinet",))
    ok = await cli("verify", game_id, "--server", node.url)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    lines = stored(redis_url, game_id)
    version = len(lines) + 1
    event = placement(fold(lines), 0, "timpani", "forged")
    client = redis.Redis.from_url(redis_url)
    try:
        for at, why in (
            (utc_now(), "after its retirement"),
            (_at(retired_at - timedelta(seconds=1)), "after its successor"),
        ):
            line = sealed(stolen, lines, at, "forged", 0, event)
            client.delete(_events_key(game_id))  # the stream as it was, then the forged line
            for number, kept in enumerate([*lines, line], start=1):
                client.xadd(_events_key(game_id), {"e": kept}, id=f"0-{number}")
            bad = await cli("verify", game_id, "--server", node.url)
            assert bad.returncode == 1, bad.stdout + bad.stderr
            assert f"INVALID at version {version}: " in bad.stdout and f"key {stolen.key_id}" in bad.stdout
            assert why in bad.stdout, bad.stdout
    finally:
        client.close()
