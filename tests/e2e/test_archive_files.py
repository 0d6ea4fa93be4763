"""Archive files and the files bulk commands read, against a real server and redis-server: an archive is
a new 0600 file in a 0700 folder and never written through a planted link; `import DIR` and
`verify --file DIR` report each bad file (too deep, too large, a device, a FIFO) and go on; an export of a
game in play is not imported as a live game no one can play."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from orchestra_client import GameClient
from server.ops.files import MAX_FILE_BYTES
from tests.support.e2e import PERF, expect_accepted, new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
LIVE_KEY = "{orchestra:games}:live"


async def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server.ops.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def options(server: Any, redis_url: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--data-dir", str(server.directory / "var"))


async def ended_game(url: str) -> str:
    game_id, tokens = await new_game(url, ["Ada"])
    async with await GameClient.connect(url, game_id, tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
        expect_accepted(await ada.end_game())
    return game_id


def fenced(redis_url: str, game_id: str) -> bool:
    client = redis.Redis.from_url(redis_url)
    try:
        return bool(client.hexists(f"orchestra:{{{game_id}}}:commands", "!fenced"))
    finally:
        client.close()


def in_store(redis_url: str, game_id: str) -> bool:
    client = redis.Redis.from_url(redis_url)
    try:
        return bool(client.exists(f"orchestra:{{{game_id}}}:events"))
    finally:
        client.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_an_archive_is_a_private_file_in_a_private_folder(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id = await ended_game(server.url)
    out = tmp_path / "new" / "archive" / f"{game_id}.ndjson"
    done = await cli("archive", game_id, "--out", str(out), *options(server, redis_url))
    assert done.returncode == 0, done.stdout + done.stderr
    assert mode(out) == 0o600 and mode(out.parent) == 0o700
    assert not in_store(redis_url, game_id)


async def test_an_archive_refuses_a_planted_link_and_keeps_the_game(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id = await ended_game(server.url)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # a folder others may write to
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    part = shared / f".{game_id}.ndjson.part"
    part.symlink_to(victim)
    out = shared / f"{game_id}.ndjson"

    refused = await cli("archive", game_id, "--out", str(out), *options(server, redis_url))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"{part} is a symbolic link: refusing to write the archive through it" in refused.stderr
    assert victim.read_text() == "precious\n" and part.is_symlink() and not out.exists()
    assert in_store(redis_url, game_id) and not fenced(redis_url, game_id)
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{game_id}")).status_code == 200

    # A link in the archive's own place: not followed, not reused, the game kept.
    part.unlink()
    out.symlink_to(victim)
    refused = await cli("archive", game_id, "--out", str(out), *options(server, redis_url))
    assert refused.returncode == 1 and "a symbolic link (not followed here)" in refused.stderr, refused.stderr
    assert victim.read_text() == "precious\n" and in_store(redis_url, game_id)

    # A leftover of a stopped write (a regular file) is replaced.
    out.unlink()
    part.write_text("half a game")
    done = await cli("archive", game_id, "--out", str(out), *options(server, redis_url))
    assert done.returncode == 0, done.stdout + done.stderr
    assert mode(out) == 0o600 and not part.exists() and not in_store(redis_url, game_id)


def plant_bad_files(folder: Path) -> dict[str, Path]:
    """One file of each kind a bulk run must survive, in `folder`."""
    deep = b"[" * 200_000 + b"]" * 200_000
    bad = {
        "deep": folder / "deep.ndjson",
        "deep-in-object": folder / "deep-in-object.ndjson",
        "zero": folder / "zero.ndjson",
        "fifo": folder / "fifo.ndjson",
        "large": folder / "large.ndjson",
    }
    bad["deep"].write_bytes(deep + b"\n")
    bad["deep-in-object"].write_bytes(b'{"v":1,"game_id":"g","x":' + deep + b"}\n")
    bad["zero"].symlink_to("/dev/zero")
    os.mkfifo(bad["fifo"])
    with open(bad["large"], "wb") as out:  # sparse: over the bound without using the disk
        out.truncate(MAX_FILE_BYTES + 1)
    return bad


async def test_import_and_verify_of_a_folder_report_each_bad_file_and_go_on(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "archives"
    game_id = await ended_game(server.url)
    good = folder / f"{game_id}.ndjson"
    assert (await cli("archive", game_id, "--out", str(good), *options(server, redis_url))).returncode == 0
    bad = plant_bad_files(folder)

    started = time.monotonic()
    checked = await cli(
        "verify", "--file", str(folder), "--data-dir", str(server.directory / "var"), timeout=60
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "Traceback" not in checked.stderr
    assert f"{bad['deep']}: INVALID at version 1: unreadable envelope" in checked.stdout
    assert f"{bad['deep-in-object']}: INVALID: a line is nested too deeply to read" in checked.stdout
    assert f"{bad['zero']}: skipped: a character device, not a regular file" in checked.stdout
    assert f"{bad['fifo']}: skipped: a FIFO, not a regular file" in checked.stdout
    assert f"{bad['large']}: cannot read: {MAX_FILE_BYTES + 1} bytes, over the bound" in checked.stdout
    assert f"{good}: 3 envelopes verified (ended)" in checked.stderr
    assert checked.stdout.splitlines()[-1].startswith("verify: 1 verified, 2 skipped, 3 failed, of 6 in ")

    imported = await cli("import", str(folder), *options(server, redis_url), timeout=60)
    assert imported.returncode == 1, imported.stdout + imported.stderr
    assert "Traceback" not in imported.stderr
    assert f"{bad['deep']}: INVALID at version 1: unreadable envelope" in imported.stdout
    assert f"{bad['deep-in-object']}: INVALID: a line is nested too deeply to read" in imported.stdout
    assert f"{bad['zero']}: skipped: a character device" in imported.stdout
    assert f"{bad['fifo']}: skipped: a FIFO" in imported.stdout
    assert f"{bad['large']}: cannot read: " in imported.stdout
    assert imported.stdout.splitlines()[-1].startswith("import: 1 imported, 2 skipped, 3 failed, of 6 in ")
    assert in_store(redis_url, game_id)
    assert time.monotonic() - started < 60  # nothing waited on the FIFO nor read /dev/zero to its end

    # One bad file given alone: the same words, no traceback.
    alone = await cli(
        "verify", "--file", str(bad["deep-in-object"]), "--data-dir", str(server.directory / "var")
    )
    assert alone.returncode == 1 and "nested too deeply" in alone.stdout and "Traceback" not in alone.stderr
    fifo = await cli(
        "verify", "--file", str(bad["fifo"]), "--data-dir", str(server.directory / "var"), timeout=30
    )
    assert fifo.returncode == 1 and "a FIFO, not a regular file" in fifo.stderr, fifo.stderr


async def test_an_export_of_a_game_in_play_is_not_imported_as_a_live_game(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
    exported = await cli("export", game_id, "--trailer", "--server", server.url)
    assert exported.returncode == 0, exported.stderr
    export = tmp_path / "export.ndjson"
    export.write_text(exported.stdout)
    archive = tmp_path / "archive.ndjson"
    forced = await cli("archive", game_id, "--force", "--out", str(archive), *options(server, redis_url))
    assert forced.returncode == 0, forced.stdout + forced.stderr
    client = redis.Redis.from_url(redis_url)
    try:
        live_before = client.scard(LIVE_KEY)

        refused = await cli("import", str(export), *options(server, redis_url))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert (
            f"game {game_id!r} has not ended and the file does not carry its seats' credentials"
            in refused.stdout
        )
        assert not in_store(redis_url, game_id)
        assert client.scard(LIVE_KEY) == live_before and not client.sismember(LIVE_KEY, game_id)
        assert client.exists(f"orchestra:{{{game_id}}}:auth") == 0
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert (await http.get(f"/games/{game_id}")).status_code == 404
            assert game_id not in {g["game_id"] for g in (await http.get("/games")).json()}

        # The signed archive of the same game carries its seats' credentials: it comes back in play.
        back = await cli("import", str(archive), *options(server, redis_url))
        assert back.returncode == 0, back.stdout + back.stderr
        assert client.sismember(LIVE_KEY, game_id)
    finally:
        client.close()
    async with await GameClient.connect(server.url, game_id, tokens[1], reconnect=False) as ben:
        expect_accepted(await ben.place(PERF, "viola"))
