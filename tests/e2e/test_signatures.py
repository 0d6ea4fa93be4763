"""Signed game records against a real server and its Redis: each tampering a writer of Redis can do is
found at its first bad version by `orchestra verify`; exports verify offline; keys rotate; old unsigned
games still verify when allowed."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import redis

from orchestra_client import GameClient
from server.engine.signing import Signer
from server.protocol import envelope
from tests.support.e2e import PERF, new_game
from tests.support.forgery import resigned
from tests.support.logs import logged
from tests.support.redis import stream_entries
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
Raw = dict[str, Any]
# What the node warns once it reads a stream that was written over under it.
READ_AGAIN = "the stream no longer holds what this node folded: game read again"


def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(orchestra, *args)


async def _play(url: str, game_id: str, tokens: list[str], spaces: tuple[str, ...], end: bool) -> None:
    async with await GameClient.connect(url, game_id, tokens[0]) as ada:
        async with await GameClient.connect(url, game_id, tokens[1]) as ben:
            for space in spaces:
                assert (await ada.place(PERF, space))["type"] == "accepted"
                assert (await ben.place(PERF, space))["type"] == "accepted"
            if end:
                assert (await ada.end_game())["type"] == "accepted"


async def _finished_game(url: str) -> str:
    game_id, tokens = await new_game(url, ["Ada", "Ben"])
    await _play(url, game_id, tokens, ("viola", "clarinet", "timpani"), end=True)
    return game_id


# What a writer of Redis can do: read a game's stream, and write it back changed (same entry ids).


def _key(game_id: str) -> str:
    return f"orchestra:{{{game_id}}}:events"


def _read(redis_url: str, game_id: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return [fields[b"e"] for _, fields in stream_entries(client, _key(game_id))]
    finally:
        client.close()


def _write(redis_url: str, game_id: str, lines: list[bytes]) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        client.delete(_key(game_id))
        for version, line in enumerate(lines, start=1):
            client.xadd(_key(game_id), {"e": line}, id=f"0-{version}")
    finally:
        client.close()


def _rechained(
    lines: list[bytes], changes: dict[int, Callable[[Raw], None]], strip: bool = False
) -> list[bytes]:
    """Apply `changes` (version -> edit of its JSON object) and make every `prev` the hash of the line
    before again, as a careful forger would; with `strip`, without any signature."""
    out: list[bytes] = []
    for version, line in enumerate(lines, start=1):
        raw: Raw = msgspec.json.decode(line)
        if version in changes:
            changes[version](raw)
        if strip:
            raw.pop("key", None)
            raw.pop("sig", None)
            raw.pop("proof", None)
        raw["prev"] = envelope.chain_hash(out[-1]) if out else envelope.GENESIS
        out.append(msgspec.json.encode(raw))
    return out


def _first(lines: list[bytes], kind: str) -> int:
    return next(i for i, line in enumerate(lines) if f'"type":"{kind}"'.encode() in line) + 1


async def _keys(url: str) -> Raw:
    async with httpx.AsyncClient(base_url=url) as http:
        answer = await http.get("/signing-keys")
    assert answer.status_code == 200
    keys: Raw = answer.json()
    return keys


async def test_the_server_signs_every_envelope_with_the_key_it_lists_and_the_command_prints(
    server: Any,
) -> None:
    game_id = await _finished_game(server.url)
    keys = await _keys(server.url)
    (current,) = keys["keys"]
    assert keys["current"] == current["id"] and current["status"] == "current"
    public = base64.b64decode(current["public_key"])
    assert len(public) == 32 and hashlib.sha256(public).hexdigest()[:16] == current["id"]
    async with httpx.AsyncClient(base_url=server.url) as http:
        lines = (await http.get(f"/games/{game_id}/events")).content.splitlines()
    assert lines and all(msgspec.json.decode(line)["key"] == current["id"] for line in lines)
    key_file = server.directory / "var" / "signing.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    printed = await cli("signing-key", "--data-dir", str(server.directory / "var"))
    assert printed.returncode == 0, printed.stderr
    assert f"{current['id']} current  {current['public_key']}" in printed.stdout


def _move_chair(lines: list[bytes]) -> tuple[list[bytes], int]:
    victim = _first(lines, "ChairClaimed")

    def move(raw: Raw) -> None:
        raw["seat"] = raw["event"]["seat"] = 1 - raw["seat"]

    return _rechained(lines, {victim: move}), victim


def _raise_bonus_and_layout(lines: list[bytes]) -> tuple[list[bytes], int]:
    space = msgspec.json.decode(lines[_first(lines, "ChairClaimed") - 1])["event"]["space"]

    def layout(raw: Raw) -> None:
        for item in raw["event"]["layout"]["spaces"]:
            if item["id"] == space:
                item["bonus"]["money"] = item["bonus"].get("money", 0) + 5

    def bonus(raw: Raw) -> None:
        if raw["event"].get("space") == space and "bonus" in raw["event"]:
            raw["event"]["bonus"]["money"] = raw["event"]["bonus"].get("money", 0) + 5

    return _rechained(lines, {1: layout, **{v: bonus for v in range(2, len(lines) + 1)}}), 1


def _forge_id_and_time(lines: list[bytes]) -> tuple[list[bytes], int]:
    def forge(raw: Raw) -> None:
        raw["command_id"], raw["at"] = "forged", "2020-01-01T00:00:00.000Z"

    return _rechained(lines, {3: forge}), 3


def _strip_signatures(lines: list[bytes]) -> tuple[list[bytes], int]:
    return _rechained(lines, {}, strip=True), 1


def _resign_with_another_key(lines: list[bytes]) -> tuple[list[bytes], int]:
    """Seats swapped from version 2 on, the chain hashed again and every envelope signed with a key of the
    forger's own."""
    forger = Signer.generate()

    def swap(raw: Raw) -> None:
        raw["seat"] = raw["event"]["seat"] = 1 - raw["seat"]

    unsigned = _rechained(lines, {v: swap for v in range(2, len(lines) + 1)}, strip=True)
    out: list[bytes] = []
    for line in unsigned:
        raw = msgspec.json.decode(line)
        raw["prev"] = envelope.chain_hash(out[-1]) if out else envelope.GENESIS
        out.append(resigned(raw, forger))
    return out, 1


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        pytest.param(_move_chair, "bad signature", id="chair-moved-to-another-seat"),
        pytest.param(_raise_bonus_and_layout, "bad signature", id="bonus-raised-with-the-layout"),
        pytest.param(_forge_id_and_time, "bad signature", id="forged-command-id-and-time"),
        pytest.param(_strip_signatures, "not signed", id="chain-rehashed-without-signatures"),
        pytest.param(
            _resign_with_another_key, "not one of the trusted keys", id="chain-resigned-by-a-forger"
        ),
    ],
)
@pytest.mark.logs_warnings  # the node reads the game it had folded again, warning so
async def test_a_stream_tampered_in_redis_is_invalid_at_its_first_bad_version(
    server: Any, redis_url: str, tamper: Callable[[list[bytes]], tuple[list[bytes], int]], problem: str
) -> None:
    game_id = await _finished_game(server.url)
    ok = await cli("verify", game_id, "--server", server.url)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "complete: the history ends with the game's signed end" in ok.stdout
    forged, version = tamper(_read(redis_url, game_id))
    _write(redis_url, game_id, forged)
    bad = await cli("verify", game_id, "--server", server.url)
    assert bad.returncode == 1, bad.stdout
    assert f"INVALID at version {version}: " in bad.stdout and problem in bad.stdout
    await until(lambda: logged(server.logs(), READ_AGAIN, game_id=game_id), 10, "the node's warning")


@pytest.mark.logs_warnings  # the node reads the game it had folded again, warning so
async def test_dropped_last_envelopes_are_found_against_an_earlier_export_and_in_a_cut_file(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id = await _finished_game(server.url)
    exported = await cli("export", game_id, "--trailer", "--server", server.url)
    assert exported.returncode == 0, exported.stderr
    earlier = tmp_path / "earlier.ndjson"
    earlier.write_text(exported.stdout)
    lines = _read(redis_url, game_id)
    assert exported.stdout.splitlines()[-1].startswith('{"type":"trailer"')

    # A cut file: the last envelope gone, its trailer kept; then the trailer gone with the signed end.
    cut = tmp_path / "cut.ndjson"
    cut.write_bytes(b"\n".join([*lines[:-1], exported.stdout.splitlines()[-1].encode()]) + b"\n")
    found = await cli("verify", "--file", str(cut), "--data-dir", str(server.directory / "var"))
    assert found.returncode == 1 and f"INVALID at version {len(lines)}: truncated" in found.stdout
    cut.write_bytes(b"\n".join(lines[:-2]) + b"\n")
    found = await cli("verify", "--file", str(cut), "--data-dir", str(server.directory / "var"))
    assert found.returncode == 1 and f"INVALID at version {len(lines) - 1}: truncated?" in found.stdout

    # In Redis: the game's last two envelopes (a placement and the signed end) dropped.
    _write(redis_url, game_id, lines[:-2])
    async with httpx.AsyncClient(base_url=server.url) as http:
        await http.get(f"/games/{game_id}")  # the node notices the stream went back and reloads it
    alone = await cli("verify", game_id, "--server", server.url)
    assert alone.returncode == 0 and "the game has not ended" in alone.stdout  # all a stream can tell
    found = await cli("verify", game_id, "--server", server.url, "--against", str(earlier))
    assert found.returncode == 1, found.stdout + found.stderr
    assert f"INVALID at version {len(lines) - 1}: truncated" in found.stdout
    await until(lambda: logged(server.logs(), READ_AGAIN, game_id=game_id), 10, "the node's warning")


async def test_an_export_verifies_offline_with_the_public_key_or_the_data_dir(
    server: Any, tmp_path: Path
) -> None:
    game_id = await _finished_game(server.url)
    exported = await cli("export", game_id, "--server", server.url)
    assert exported.returncode == 0
    path = tmp_path / "game.ndjson"
    path.write_text(exported.stdout)
    public = (await _keys(server.url))["keys"][0]["public_key"]
    by_key = await cli("verify", "--file", str(path), "--public-key", public)
    assert by_key.returncode == 0, by_key.stdout + by_key.stderr
    assert f"{len(exported.stdout.splitlines())} envelopes verified" in by_key.stdout
    by_dir = await cli("verify", "--file", str(path), "--data-dir", str(server.directory / "var"))
    assert by_dir.returncode == 0, by_dir.stdout + by_dir.stderr
    stranger = Signer.generate().public_text()  # a key, but not the server's
    wrong = await cli("verify", "--file", str(path), "--public-key", stranger)
    assert wrong.returncode == 1 and "INVALID at version 1" in wrong.stdout


async def test_an_archive_carries_the_signatures_and_a_trailer_and_verifies_offline(
    server: Any, redis_url: str, tmp_path: Path
) -> None:
    game_id = await _finished_game(server.url)
    out = tmp_path / f"{game_id}.ndjson"
    data_dir = str(server.directory / "var")
    done = await cli("archive", game_id, "--out", str(out), "--redis-url", redis_url, "--data-dir", data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = out.read_bytes().splitlines()
    assert lines[-1].startswith(b'{"type":"trailer"') and all(b'"sig":"' in line for line in lines)
    checked = await cli("verify", "--file", str(out), "--data-dir", data_dir)
    assert checked.returncode == 0 and "complete" in checked.stdout, checked.stdout


async def test_after_a_key_rotation_old_envelopes_verify_and_new_ones_use_the_new_key(
    start_server: Callable[..., Any], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir=str(data_dir))
    game_id, tokens = await new_game(first.url, ["Ada", "Ben"])
    await _play(first.url, game_id, tokens, ("viola",), end=False)
    old = (await _keys(first.url))["current"]
    first.stop()

    rotated = await cli("signing-key", "--rotate", "--data-dir", str(data_dir))
    assert rotated.returncode == 0, rotated.stderr
    assert f"retired {old}" in rotated.stdout and (data_dir / "signing.key.retired").exists()

    second = start_server(data_dir=str(data_dir))
    keys = await _keys(second.url)
    new = keys["current"]
    assert new != old
    assert {(k["id"], k["status"]) for k in keys["keys"]} == {(new, "current"), (old, "retired")}
    await _play(second.url, game_id, tokens, ("clarinet",), end=True)
    async with httpx.AsyncClient(base_url=second.url) as http:
        lines = (await http.get(f"/games/{game_id}/events")).content.splitlines()
    signers = [msgspec.json.decode(line)["key"] for line in lines]
    assert signers[:3] == [old] * 3 and signers[3:] == [new] * (len(lines) - 3)
    checked = await cli("verify", game_id, "--server", second.url)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    listed = await cli("signing-key", "--data-dir", str(data_dir))
    assert f"{old} retired" in listed.stdout and f"{new} current" in listed.stdout


async def test_a_game_recorded_before_signing_still_plays_and_verifies_when_unsigned_is_allowed(
    start_server: Callable[..., Any], redis_url: str
) -> None:
    node = start_server()
    game_id, tokens = await new_game(node.url, ["Ada", "Ben"])
    await _play(node.url, game_id, tokens, ("viola",), end=False)
    legacy = _rechained(_read(redis_url, game_id), {}, strip=True)
    assert all(b'"key"' not in line and b'"sig"' not in line for line in legacy)
    _write(redis_url, game_id, legacy)

    upgraded = start_server()  # a node that loads the old game from the stream, as after an upgrade
    refused = await cli("verify", game_id, "--server", upgraded.url)
    assert refused.returncode == 1 and "INVALID at version 1: not signed" in refused.stdout
    await _play(upgraded.url, game_id, tokens, ("clarinet",), end=True)
    allowed = await cli("verify", game_id, "--server", upgraded.url, "--allow-unsigned")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert f"({len(legacy)} envelopes unsigned, recorded before signing)" in allowed.stdout


async def test_serve_refuses_a_signing_key_that_does_not_parse_or_a_named_file_that_is_missing(
    tmp_path: Path,
) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    for setting in (
        {"ORCHESTRA_SIGNING_KEY": "change-me"},
        {"ORCHESTRA_SIGNING_KEY_FILE": str(tmp_path / "missing.key")},
    ):
        env = {**base, "ORCHESTRA_DATA_DIR": str(tmp_path / "var"), **setting}
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "server.ops.cli", "serve", "--port", "0"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and "the server was not started" in done.stderr, done.stderr
