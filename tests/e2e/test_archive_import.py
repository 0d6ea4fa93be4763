"""`orchestra import` and `orchestra verify --file` of archives, against a real server and redis-server:
a round trip gives the same bytes, the imported game is served, replayed and verified as before (its
tokens and its commands' first answers too), and a tampered file or an existing id is refused with
nothing written."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import httpx
import msgspec
import pytest
import redis

from orchestra_client import GameClient
from tests.support.e2e import PERF, expect_accepted, new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(orchestra, *args)


async def ended_game(url: str, spectators: str = "public", end_id: str = "the-end") -> tuple[str, list[str]]:
    """A game of two that placed and ended (its end's command id `end_id`); its id and seat tokens."""
    game_id, tokens = await new_game(url, ["Ada", "Ben"], spectators=spectators)
    async with await GameClient.connect(url, game_id, tokens[0], reconnect=False) as ada:
        async with await GameClient.connect(url, game_id, tokens[1], reconnect=False) as ben:
            for space in ("viola", "clarinet"):
                expect_accepted(await ada.place(PERF, space))
                expect_accepted(await ben.place(PERF, space))
            expect_accepted(await ada.end_game(id=end_id))
    return game_id, tokens


def stored(redis_url: str, game_id: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        entries = cast(
            list[tuple[bytes, dict[bytes, bytes]]], client.xrange(f"orchestra:{{{game_id}}}:events")
        )
        return [fields[b"e"] for _, fields in entries]
    finally:
        client.close()


def key_options(server: Any, redis_url: str) -> tuple[str, ...]:
    """The options that reach the server's Redis and its signing key (to verify and sign with)."""
    return ("--redis-url", redis_url, "--data-dir", str(server.directory / "var"))


async def test_an_archived_game_comes_back_byte_identical_and_is_served_replayed_and_verified_again(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id, tokens = await ended_game(server.url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        exported = (await http.get(f"/games/{game_id}/events")).content
        views = [(await http.get(f"/games/{game_id}", params={"at": n})).json() for n in (1, 3, 6)]
        final = (await http.get(f"/games/{game_id}")).json()
    out = tmp_path / f"{game_id}.ndjson"
    done = await cli("archive", game_id, "--out", str(out), *key_options(server, redis_url))
    assert done.returncode == 0, done.stderr
    archived = out.read_bytes().splitlines()
    assert (
        archived[-1].startswith(b'{"type":"trailer"')
        and b'"seat:0":' in archived[-1].split(b'"credentials":')[1]
    )
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{game_id}")).status_code == 404

    imported = await cli("import", str(out), *key_options(server, redis_url))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert "import: 1 imported, 0 skipped, 0 failed, of 1" in imported.stdout
    assert f"[1/1] {out}: game {game_id} imported: 6 envelopes, its tokens work as before" in imported.stderr

    # The same bytes: the export of the imported game is the file's envelopes, and the export before.
    assert stored(redis_url, game_id) == archived[:-1]
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{game_id}/events")).content == exported
        assert [(await http.get(f"/games/{game_id}", params={"at": n})).json() for n in (1, 3, 6)] == views
        assert (await http.get(f"/games/{game_id}")).json() == final
        for page in ("watch", "replay"):
            answer = await http.get(f"/games/{game_id}/{page}")
            assert answer.status_code == 200 and "text/html" in answer.headers["content-type"]
        listed = {g["game_id"]: g for g in (await http.get("/games")).json()}
    assert listed[game_id]["ended"] is True and listed[game_id]["version"] == 6
    verified = await cli("verify", game_id, "--server", server.url)
    assert verified.returncode == 0 and "the live view matches" in verified.stdout, verified.stdout

    # Its seats' tokens work, and a repeat of the command that ended it gets its first answer.
    async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
        assert ada.seat == 0 and ada.version == 6
        again = expect_accepted(await ada.end_game(id="the-end"))
        assert again["version"] == 6
        assert (await ada.place(PERF, "viola"))["type"] == "rejected"
    async with await GameClient.connect(server.url, game_id, None, reconnect=False) as watcher:
        assert watcher.version == 6
        assert watcher.view == {key: value for key, value in final.items() if key != "presence"}

    # Archived again, the file holds the same envelopes; imported again, the same game is skipped.
    again_out = tmp_path / "again.ndjson"
    assert (
        await cli("archive", game_id, "--out", str(again_out), *key_options(server, redis_url))
    ).returncode == 0
    assert again_out.read_bytes().splitlines()[:-1] == archived[:-1]
    assert (await cli("import", str(again_out), *key_options(server, redis_url))).returncode == 0
    rerun = await cli("import", str(again_out), *key_options(server, redis_url))
    assert rerun.returncode == 0 and "0 imported, 1 skipped, 0 failed" in rerun.stdout
    assert f"game {game_id} is in the store already, the same" in rerun.stderr


async def test_a_private_game_comes_back_with_its_tokens_and_only_with_them(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        created = (await http.post("/games", json={"players": ["Ada"], "spectators": "token"})).json()
        public = (await http.get("/signing-keys")).json()["keys"][0]["public_key"]
    game_id, watch, ada = created["game_id"], created["watch_token"], created["seats"][0]["token"]
    async with await GameClient.connect(server.url, game_id, ada, reconnect=False) as client:
        expect_accepted(await client.end_game())
    signed = tmp_path / "signed.ndjson"
    assert (
        await cli("archive", game_id, "--out", str(signed), *key_options(server, redis_url))
    ).returncode == 0
    imported = await cli("import", str(signed), *key_options(server, redis_url))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{game_id}")).status_code == 403
        for token in (watch, ada):
            auth = {"authorization": f"Bearer {token}"}
            assert (await http.get(f"/games/{game_id}", headers=auth)).status_code == 200

    # Archived where the signing key is not, the file has no trailer and so no credentials: no one could
    # read the game it would bring back, and it is refused.
    bare = tmp_path / "bare.ndjson"
    elsewhere = ("--redis-url", redis_url, "--data-dir", str(tmp_path / "keyless"), "--public-key", public)
    assert (await cli("archive", game_id, "--out", str(bare), *elsewhere)).returncode == 0
    assert not bare.read_bytes().splitlines()[-1].startswith(b'{"type":"trailer"')
    refused = await cli("import", str(bare), *elsewhere)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"game {game_id!r} is private and the file carries no credentials" in refused.stdout
    assert stored(redis_url, game_id) == []


def _tamper(path: Path, version: int, change: dict[str, Any]) -> None:
    lines = path.read_bytes().splitlines()
    raw = msgspec.json.decode(lines[version - 1])
    raw["event"].update(change)
    lines[version - 1] = msgspec.json.encode(raw)
    path.write_bytes(b"\n".join(lines) + b"\n")


async def test_import_refuses_a_tampered_file_and_writes_nothing(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id, _ = await ended_game(server.url)
    out = tmp_path / "game.ndjson"
    assert (await cli("archive", game_id, "--out", str(out), *key_options(server, redis_url))).returncode == 0
    good = out.read_bytes()

    _tamper(out, 4, {"space": "timpani"})
    refused = await cli("import", str(out), *key_options(server, redis_url))
    assert refused.returncode == 1
    assert f"{out}: INVALID at version 4: bad signature" in refused.stdout
    assert "0 imported, 0 skipped, 1 failed" in refused.stdout

    # A token hash added to the archive's credentials: its trailer's signature no longer holds.
    lines = good.splitlines()
    lines[-1] = lines[-1].replace(b'"credentials":{', b'"credentials":{"seat:9":"' + b"0" * 64 + b'",')
    out.write_bytes(b"\n".join(lines) + b"\n")
    refused = await cli("import", str(out), *key_options(server, redis_url))
    assert (
        refused.returncode == 1
        and f"INVALID at version {len(lines)}: trailer: bad signature" in refused.stdout
    )

    assert stored(redis_url, game_id) == []
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.exists(f"orchestra:{{{game_id}}}:auth", f"orchestra:{{{game_id}}}:commands") == 0
        assert client.zscore("orchestra:games", game_id) is None
    finally:
        client.close()
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{game_id}")).status_code == 404


async def test_import_refuses_an_id_the_store_holds_with_another_history_unless_told_to_skip(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada"])
    async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
        exported = await cli("export", game_id, "--trailer", "--server", server.url)
        expect_accepted(await ada.place(PERF, "clarinet"))
    earlier = tmp_path / "earlier.ndjson"
    earlier.write_text(exported.stdout)
    before = stored(redis_url, game_id)

    refused = await cli("import", str(earlier), *key_options(server, redis_url))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"game {game_id!r} exists, with another history" in refused.stdout
    skipped = await cli("import", str(earlier), "--skip-existing", *key_options(server, redis_url))
    assert skipped.returncode == 0 and "0 imported, 1 skipped, 0 failed" in skipped.stdout
    assert stored(redis_url, game_id) == before and len(before) == 3


async def test_verify_file_checks_many_files_and_names_each_bad_ones_first_bad_version(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "archives"
    games = [(await ended_game(server.url))[0] for _ in range(3)]
    for game_id in games:
        out = folder / f"{game_id}.ndjson"
        assert (
            await cli("archive", game_id, "--out", str(out), *key_options(server, redis_url))
        ).returncode == 0
    changed, cut, good = (folder / f"{game_id}.ndjson" for game_id in games)
    _tamper(changed, 2, {"space": "timpani"})
    lines = cut.read_bytes().splitlines()
    cut.write_bytes(b"\n".join([*lines[:-2], lines[-1]]) + b"\n")  # the end dropped, the trailer kept

    keys = ("--data-dir", str(server.directory / "var"))
    checked = await cli("verify", "--file", str(changed), str(cut), str(good), *keys)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    report = checked.stdout.splitlines()
    assert f"{changed}: INVALID at version 2: bad signature (key " in checked.stdout
    assert f"{cut}: INVALID at version 6: truncated: the signed trailer says version 6" in checked.stdout
    assert not any(str(good) in line for line in report)
    assert report[-1].startswith("verify: 1 verified, 0 skipped, 2 failed, of 3 in ")
    assert f"[3/3] {good}: 6 envelopes verified (ended)" in checked.stderr

    # A folder stands for its files; a good folder exits 0.
    cut.unlink()
    changed.unlink()
    whole = await cli("verify", "--file", str(folder), *keys)
    assert whole.returncode == 0 and "verify: 1 verified, 0 skipped, 0 failed, of 1" in whole.stdout


async def test_import_by_data_dir_works_while_the_server_runs_and_after_it_stopped(
    start_server: Any, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = start_server(redis_url=None, data_dir=data_dir)
    games = [(await ended_game(server.url))[0] for _ in range(2)]
    options = ("--data-dir", str(data_dir))
    files = [tmp_path / f"{game_id}.ndjson" for game_id in games]
    for game_id, out in zip(games, files, strict=True):
        assert (await cli("archive", game_id, "--out", str(out), *options)).returncode == 0

    running = await cli("import", str(files[0]), *options)  # through the running server's Redis
    assert running.returncode == 0, running.stdout + running.stderr
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get(f"/games/{games[0]}/events")).content.splitlines() == (
            files[0].read_bytes().splitlines()[:-1]
        )
    assert await asyncio.to_thread(server.terminate) in (0, -15)

    stopped = await cli("import", str(files[1]), *options)  # the embedded Redis of its own
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    again = start_server(redis_url=None, data_dir=data_dir)
    async with httpx.AsyncClient(base_url=again.url) as http:
        for game_id, out in zip(games, files, strict=True):
            served = (await http.get(f"/games/{game_id}/events")).content.splitlines()
            assert served == out.read_bytes().splitlines()[:-1]
