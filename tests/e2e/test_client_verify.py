"""The Python client checks what it was told: `verify_envelope` on a real server's envelopes (as dicts and
as stored lines, from the history, `accepted` and live frames, batches across games), each way of
altering one, envelopes signed alone, and `GameClient(verify=True)` ending a session at an envelope
altered in the store."""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest

from orchestra_client import ConnectionRefused, GameClient, SigningKeys, Verified, get_events, verify_envelope
from orchestra_client.verify import chain_hash
from server.engine.signing import ENVELOPE, Signer
from tests.support.e2e import PERF, expect_accepted, new_game
from tests.support.redis import rewrite_stored
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

# Names whose JSON needs escapes and more than ASCII: a dict encoded again must be the server's bytes.
NAMES = ['Zoë "la Flûte" \\ Åsa', "李 🎻 O'Brien", "Ünal / <b> & ☃"]
SPACES = ["viola", "clarinet", "timpani", "violin_bc", "violin_cr"]
Json = dict[str, Any]


class Played:
    """Games played together: each game's stored lines, its envelopes as the history, `accepted` answers
    and live frames gave them."""

    def __init__(self) -> None:
        self.lines: dict[str, list[bytes]] = {}
        self.history: dict[str, list[Json]] = {}
        self.accepted: list[Json] = []
        self.live: list[Json] = []

    def everything(self) -> list[Json]:
        return [e for game in self.history.values() for e in game] + self.accepted + self.live


async def _play_together(url: str, games: int = 6) -> Played:
    """Games whose placements are sent at once until the server signed a batch of several envelopes."""
    played = Played()
    clients: list[list[GameClient]] = []
    for _ in range(games):
        game_id, tokens = await new_game(url, NAMES)
        clients.append([await GameClient.connect(url, game_id, token) for token in tokens])
    try:
        for turn, space in enumerate(SPACES):
            answers = await asyncio.gather(*(seats[turn % 3].place(PERF, space) for seats in clients))
            played.accepted += [e for answer in answers for e in expect_accepted(answer)["events"]]
            if turn >= 2 and any(e["proof"]["size"] > 1 for e in played.accepted):
                break
        for seats in clients:
            await seats[1].wait_for_version(seats[turn % 3].version)
            played.live += [
                e for frame in seats[1].received if frame["type"] == "events" for e in frame["envelopes"]
            ]
    finally:
        for seats in clients:
            for client in seats:
                await client.close()
    async with httpx.AsyncClient(base_url=url) as http:
        for seats in clients:
            game_id = seats[0].game_id
            response = await http.get(f"/games/{game_id}/events")
            played.lines[game_id] = [line for line in response.content.splitlines() if line]
            played.history[game_id] = await get_events(url, game_id)
    return played


def _flip(hex_hash: str) -> str:
    return ("1" if hex_hash[0] == "0" else "0") + hex_hash[1:]


async def test_a_real_servers_envelopes_verify_as_dicts_and_as_lines_with_one_signature_a_checkpoint(
    server: ServerProcess,
) -> None:
    played = await _play_together(server.url)
    keys = await SigningKeys.fetch(server.url)
    everything = played.everything()
    assert any(e["proof"]["path"] for e in everything), "no batch of several envelopes"
    for item in everything:
        assert verify_envelope(item, keys) == Verified(True), item
    for game_id, lines in played.lines.items():
        assert [msgspec.json.decode(line) for line in lines] == played.history[game_id]
        assert played.history[game_id][0]["event"]["players"] == NAMES
        for index, line in enumerate(lines):
            assert keys.verify(line).ok, line
            # The dict encoded again is the line's body: the next envelope's prev is its hash either way.
            assert chain_hash(line) == chain_hash(played.history[game_id][index])
            if index + 1 < len(lines):
                assert played.history[game_id][index + 1]["prev"] == chain_hash(line)
    checkpoints = {(e["proof"]["root"], e["proof"]["sig"]) for e in everything}
    assert keys.checkpoints_checked == len(checkpoints) < len(everything)
    # The answer of GET /signing-keys, as it is, does too (checked anew: nothing remembered).
    listing = httpx.get(f"{server.url}/signing-keys").json()
    assert verify_envelope(everything[-1], listing) and verify_envelope(everything[-1], listing["keys"])


async def test_each_way_of_altering_an_envelope_or_its_proof_is_named(server: ServerProcess) -> None:
    played = await _play_together(server.url)
    keys = await SigningKeys.fetch(server.url)
    history = [e for game in played.history.values() for e in game]
    batched = next(e for e in history if e["proof"]["path"])
    other = next(e for e in history if e["proof"]["root"] == batched["proof"]["root"] and e is not batched)

    def altered(change: Callable[[Json], object]) -> str:
        item = copy.deepcopy(batched)
        change(item)
        return verify_envelope(item, keys).problem or ""

    assert "does not lead to the signed root" in altered(lambda e: e["event"].update(space="flute"))
    assert "does not lead to the signed root" in altered(lambda e: e.update(seat=(e["seat"] + 1) % 3))
    assert "does not lead to the signed root" in altered(lambda e: e.update(prev=_flip(e["prev"])))
    assert "does not lead to the signed root" in altered(
        lambda e: e["proof"]["path"].__setitem__(0, _flip(e["proof"]["path"][0]))
    )
    assert "cannot be one of leaf" in altered(lambda e: e["proof"]["path"].append("00" * 32))
    assert "not 32 bytes" in altered(lambda e: e["proof"]["path"].__setitem__(0, "zz"))
    assert "cannot be one of leaf" in altered(lambda e: e["proof"].update(index=e["proof"]["size"]))
    assert "does not lead to the signed root" in altered(
        lambda e: e["proof"].update(root=_flip(e["proof"]["root"]))
    )
    assert "bad checkpoint signature" in altered(lambda e: e["proof"].update(at="2020-01-01T00:00:00.000Z"))
    assert "bad checkpoint signature" in altered(
        lambda e: e["proof"].update(sig=base64.b64encode(bytes(64)).decode())
    )
    assert "not an inclusion path" in altered(lambda e: e["proof"].pop("root"))
    assert "not one of the trusted keys" in altered(lambda e: e.update(key="0123456789abcdef"))
    assert altered(lambda e: e.pop("proof")) == "not signed"
    # A genuine checkpoint and path moved to another envelope of the same batch.
    moved = {**{k: v for k, v in batched.items() if k != "proof"}, "proof": other["proof"]}
    assert not verify_envelope(moved, keys).ok
    # A signature put before the proof, so that the body would end otherwise.
    twice = {**{k: v for k, v in batched.items() if k != "proof"}, "sig": "x", "proof": batched["proof"]}
    assert "only field after it" in (verify_envelope(twice, keys).problem or "")
    renamed = copy.deepcopy(history[0])
    renamed["event"]["players"][0] = "Mallory"
    assert "bad signature" in (verify_envelope(renamed, keys).problem or "")
    assert verify_envelope(batched, SigningKeys([])).problem == (
        f"signed by key {batched['key']}, which is not one of the trusted keys"
    )
    # The stored line, altered as bytes.
    line = next(iter(played.lines.values()))[1]
    assert "does not lead" in (verify_envelope(line.replace(b'"seat":0', b'"seat":1', 1), keys).problem or "")
    assert verify_envelope(b"not json", keys).problem == "not an envelope"
    assert verify_envelope(batched, keys).ok  # the copies changed nothing


def _signed_alone(lines: list[bytes], signer: Signer) -> list[bytes]:
    """A game as a server that signed each envelope on its own wrote it (before batches)."""
    out: list[bytes] = []
    for line in lines:
        raw = msgspec.json.decode(line)
        raw.pop("proof")
        raw["prev"] = hashlib.sha256(out[-1]).hexdigest() if out else "0" * 64
        raw["key"] = signer.key_id
        out.append(signer.sign(ENVELOPE, msgspec.json.encode({**raw, "sig": None})))
    return out


async def test_envelopes_signed_alone_verify_and_a_retired_keys_dates_count(server: ServerProcess) -> None:
    played = await _play_together(server.url, games=1)
    signer = Signer.generate()
    old = _signed_alone(next(iter(played.lines.values())), signer)
    listing = {"current": signer.key_id, "keys": [{"id": signer.key_id, "public_key": signer.public_text()}]}
    keys = SigningKeys(listing)
    for line in old:
        assert keys.verify(line).ok and keys.verify(msgspec.json.decode(line)).ok
        assert chain_hash(line) == hashlib.sha256(line).hexdigest()
    assert keys.checkpoints_checked == 0
    item = msgspec.json.decode(old[1])
    assert "bad signature" in (keys.verify({**item, "seat": 2}).problem or "")
    assert "bad signature" in (keys.verify(old[1].replace(b'"seat":0', b'"seat":2')).problem or "")
    unsigned = {k: v for k, v in item.items() if k not in ("key", "sig")}
    assert keys.verify(unsigned) == Verified(False, "not signed")
    retired = [{"public_key": signer.public_text(), "retired_at": "2999-01-01T00:00:00.000Z"}]
    assert verify_envelope(item, retired).ok
    retired[0]["retired_at"] = "2000-01-01T00:00:00Z"
    assert "not before its retirement" in (verify_envelope(item, retired).problem or "")


def _alter_stored(redis_url: str, game_id: str, version: int) -> None:
    """Move one stored placement from clarinet to oboe, keeping its proof."""
    rewrite_stored(
        redis_url, game_id, version, lambda data: data.replace(b'"space":"clarinet"', b'"space":"oboe"', 1)
    )


async def test_a_session_with_verify_plays_and_ends_at_an_envelope_altered_in_the_store(
    start_server: Callable[..., ServerProcess], redis_url: str
) -> None:
    # Both servers sign with one key, as the nodes of one deployment do.
    key = Signer.generate().private_text()
    first = start_server(signing_key=key)
    game_id, tokens = await new_game(first.url, NAMES)
    async with await GameClient.connect(first.url, game_id, tokens[0], verify=True) as ada:
        async with await GameClient.connect(first.url, game_id, tokens[1], since=0, verify=True) as ben:
            expect_accepted(await ada.place(PERF, "viola"))
            expect_accepted(await ben.place(PERF, "clarinet"))
            expect_accepted(await ada.place(PERF, "timpani"))
            await ben.wait_for_version(4)
            assert ada.unverified is None and ben.unverified is None and len(ben.envelopes) == 4
    first.terminate()
    _alter_stored(redis_url, game_id, 3)
    second = start_server(signing_key=key)  # reads the game from the store afresh
    watcher = await GameClient.connect(second.url, game_id, since=0, verify=True)
    with pytest.raises(ConnectionRefused) as refused:
        await watcher.wait_for_version(4)
    problem = "envelope 3 does not verify: bad signature"
    assert refused.value.reason.startswith(problem) and (watcher.unverified or "").startswith(problem)
    assert watcher.envelopes == [] and watcher.version == 0  # the history's frame is not taken, whole
    with pytest.raises(ConnectionRefused):
        await watcher.place(PERF, "cello")
    await watcher.close()
    # Without verify, the same session takes what it was told.
    async with await GameClient.connect(second.url, game_id, since=0) as trusting:
        await trusting.wait_for_version(4)
        assert trusting.envelopes[2]["event"]["space"] == "oboe"
