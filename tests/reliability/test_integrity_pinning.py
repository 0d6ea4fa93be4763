"""Integrity beyond tests/e2e/test_integrity.py: the history is pinned to the layout and the rules version
that GameCreated records. A rewritten GameCreated fails its signature at version 1. In a game recorded
before signing it breaks the chain at version 2; rewritten *and* re-chained, its layout is caught by the
rules re-check and its rules version by the verifier itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from orchestra_client import GameClient
from server.engine.signing import Keyring, public_key_from_text
from server.ops.verify import verify
from server.protocol import envelope
from tests.support.forgery import stored_line
from tests.support.redis import RedisProcess, rewrite_stored
from tests.support.reliability import new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
PERF = {"kind": "performance", "era": "classical"}


async def _stored_lines(url: str, game_id: str) -> list[bytes]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        return (await http.get(f"/games/{game_id}/events")).content.splitlines()


async def _played(url: str) -> tuple[str, list[bytes]]:
    """A game where the viola chair is claimed at version 3; its stored envelopes."""
    game_id, tokens = await new_game(url, ["Ada", "Ben"])
    async with await GameClient.connect(url, game_id, tokens[0]) as ada:
        async with await GameClient.connect(url, game_id, tokens[1]) as ben:
            assert (await ada.place(PERF, "clarinet"))["version"] == 2
            assert (await ben.place(PERF, "viola"))["version"] == 3
            assert (await ada.place(PERF, "timpani"))["version"] == 4
    return game_id, await _stored_lines(url, game_id)


async def _keys(url: str) -> Keyring:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        listed = (await http.get("/signing-keys")).json()["keys"]
    return Keyring([public_key_from_text(key["public_key"]) for key in listed])


def _unsigned(lines: list[bytes]) -> list[bytes]:
    """The same history as a server that did not sign envelopes would have written it."""
    out: list[bytes] = []
    for line in lines:
        item = envelope.decode(line)
        prev = envelope.chain_hash(out[-1]) if out else envelope.GENESIS
        out.append(envelope.encode(msgspec.structs.replace(item, key=None, sig=None, proof=None, prev=prev)))
    return out


def _change_created(line: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    raw = msgspec.json.decode(line)
    change(raw["event"])
    return envelope.encode(envelope.decode(msgspec.json.encode(raw)))


def _rechain(lines: list[bytes]) -> list[bytes]:
    """Recompute every `prev` after the first envelope, as a forger who rewrote the chain would."""
    out = [lines[0]]
    for line in lines[1:]:
        item = envelope.decode(line)
        out.append(stored_line(msgspec.structs.replace(item, prev=envelope.chain_hash(out[-1]))))
    return out


def _viola_pays_more(event: dict[str, Any]) -> None:
    for space in event["layout"]["spaces"]:
        if space["id"] == "viola":
            space["bonus"] = {"money": space["bonus"]["money"] + 3}


async def test_a_rewritten_layout_is_found_with_or_without_a_rewritten_chain(module_server: Any) -> None:
    _, signed = await _played(module_server.url)
    keys = await _keys(module_server.url)
    assert verify(signed, keys=keys).ok and verify(_rechain(signed), keys=keys).ok  # the tool alone
    report = verify(_rechain([_change_created(signed[0], _viola_pays_more), *signed[1:]]), keys=keys)
    assert (report.ok, report.bad_version) == (False, 1) and "bad signature" in (report.problem or "")
    lines = _unsigned(signed)  # recorded before signing: the chain and the rules still pin it
    assert verify(lines, keys=keys, allow_unsigned=True).ok
    forged = [_change_created(lines[0], _viola_pays_more), *lines[1:]]
    broken = verify(forged, keys=keys, allow_unsigned=True)
    assert (broken.ok, broken.bad_version) == (False, 2) and "hash chain" in (broken.problem or "")
    rechained = verify(_rechain(forged), keys=keys, allow_unsigned=True)
    # Ben's viola claim (version 3) was paid by the layout the game was played on, not the forged one.
    assert (rechained.ok, rechained.bad_version) == (False, 3)
    assert "the rules give" in (rechained.problem or "")


async def test_a_rewritten_rules_version_is_found_even_with_a_rewritten_chain(module_server: Any) -> None:
    _, signed = await _played(module_server.url)
    keys = await _keys(module_server.url)

    def newer_rules(event: dict[str, Any]) -> None:
        event["rules_version"] = 2

    report = verify([_change_created(signed[0], newer_rules), *signed[1:]], keys=keys)
    assert (report.ok, report.bad_version) == (False, 1) and "bad signature" in (report.problem or "")
    lines = _unsigned(signed)
    forged = [_change_created(lines[0], newer_rules), *lines[1:]]
    for report in (
        verify(forged, keys=keys, allow_unsigned=True),
        verify(_rechain(forged), keys=keys, allow_unsigned=True),
    ):
        assert (report.ok, report.bad_version) == (False, 1)
        assert "rules version 2" in (report.problem or "")


async def test_orchestra_verify_finds_a_layout_rewritten_in_redis(
    start_server: Callable[..., Any], redis_process: RedisProcess
) -> None:
    server = start_server(redis_process.url)
    game_id, lines = await _played(server.url)
    rewrite_stored(redis_process.url, game_id, 1, lambda data: _change_created(data, _viola_pays_more))
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server.ops.cli", "verify", game_id, "--server", server.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "INVALID at version 1" in done.stdout, done.stdout + done.stderr
