"""One signature per turn of the event loop: what rounds of many games seal together is signed once, and
every envelope still proves on its own that the key signed it; tampering with any part of a proof is
found at its version, and games signed one envelope at a time still verify."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any

import msgspec
import pytest

from domain import EndGame, PerformanceToken, Place
from server.engine.games import Games
from server.engine.signing import ENVELOPE, Keyring, Signer
from server.ops.verify import verify
from server.protocol import envelope, merkle
from server.store import StoreUnavailable
from server.store.memory import MemoryEventStore
from tests.support.appends import append

ZERO_SIGNATURE = base64.b64encode(bytes(64)).decode()
SPACES = ["viola", "violin_bc", "cello", "oboe", "clarinet", "flute"]


class CountingSigner(Signer):
    """A node's signer that counts the checkpoints it signs."""

    signed = 0

    def signature(self, data: bytes) -> str:
        CountingSigner.signed += 1
        return super().signature(data)


async def _games(service: Games, count: int) -> list[str]:
    return [(await service.create(["Ada", "Ben", "Cy"])).game_id for _ in range(count)]


async def _place_everywhere(service: Games, ids: list[str], turn: int) -> None:
    """One placement in each game, all sent at once: their rounds run in the same loop turn."""
    await asyncio.gather(
        *(
            service.handle(
                game_id,
                Place(seat=turn % 3, id=f"c{turn}", token=PerformanceToken("classical"), space=SPACES[turn]),
            )
            for game_id in ids
        )
    )


def _proof(line: bytes) -> envelope.Proof:
    proof = envelope.decode(line).proof
    assert proof is not None
    return proof


async def _stored(store: MemoryEventStore, ids: list[str]) -> dict[str, list[bytes]]:
    return {game_id: [r.data for r in await store.read(game_id)] for game_id in ids}


async def test_the_rounds_of_one_loop_turn_across_games_share_one_checkpoint_and_one_signature() -> None:
    store = MemoryEventStore()
    signer = CountingSigner(Signer.generate()._private)
    service = Games(store, signer=signer)
    ids = await _games(service, 6)
    CountingSigner.signed = 0
    await _place_everywhere(service, ids, 0)
    assert CountingSigner.signed == 1
    lines = await _stored(store, ids)
    second = [game[1] for game in lines.values()]
    proofs = [_proof(line) for line in second]
    assert {(p.root, p.sig, p.at, p.size) for p in proofs} == {
        (proofs[0].root, proofs[0].sig, proofs[0].at, 6)
    }
    assert sorted(p.index for p in proofs) == list(range(6))
    # 6 leaves split 4 and 2: the first four are 3 levels deep, the last two 2.
    assert sorted(len(p.path) for p in proofs) == [2, 2, 3, 3, 3, 3]
    # Each leaf is its line without the proof, and the path leads from it to the signed root.
    for line, proof in zip(second, proofs, strict=True):
        split = envelope.split_proof(line)
        assert split is not None
        leaf = merkle.leaf_hash(split[0])
        root = merkle.root_from_path(leaf, proof.index, proof.size, [bytes.fromhex(h) for h in proof.path])
        assert root is not None and root.hex() == proof.root
    keys = Keyring.of(signer)
    for game in lines.values():
        assert verify(game, keys=keys, complete=False).ok
    # Each distinct checkpoint is checked once per run: 6 creations (batches of their own) and 1 turn.
    assert keys.checkpoints_checked == 7


async def test_a_command_alone_is_a_batch_of_one_with_no_path() -> None:
    store = MemoryEventStore()
    service = Games(store)
    (game_id,) = await _games(service, 1)
    await service.handle(game_id, EndGame(seat=0, id="end"))
    lines = [r.data for r in await store.read(game_id)]
    for line in lines:
        proof = _proof(line)
        assert (proof.index, proof.size, proof.path) == (0, 1, [])
        split = envelope.split_proof(line)
        assert split is not None and proof.root == merkle.leaf_hash(split[0]).hex()
    assert verify(lines, keys=Keyring.of(service.node.signer), complete=True).ok


async def test_a_round_cancelled_while_its_batch_is_signed_leaves_the_others_answered() -> None:
    store = MemoryEventStore()
    service = Games(store)
    ids = await _games(service, 3)
    place = Place(seat=0, id="c0", token=PerformanceToken("classical"), space="viola")
    tasks = [asyncio.ensure_future(service.handle(game_id, place)) for game_id in ids]
    await asyncio.sleep(0)  # each round runs and hands its bodies to the notary
    tasks[1].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert [r.version for r in (results[0], results[2])] == [2, 2]  # type: ignore[union-attr]
    keys = Keyring.of(service.node.signer)
    for game in (await _stored(store, ids)).values():
        assert verify(game, keys=keys).ok


@pytest.mark.logs_warnings
async def test_a_signer_that_fails_answers_every_command_of_its_batch_and_writes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing(Signer):
        fail = False

        def signature(self, data: bytes) -> str:
            if Failing.fail:
                raise RuntimeError("the key's device is gone")
            return super().signature(data)

    store = MemoryEventStore()
    service = Games(store, signer=Failing(Signer.generate()._private))
    ids = await _games(service, 2)
    Failing.fail = True
    place = Place(seat=0, id="c0", token=PerformanceToken("classical"), space="viola")
    results = await asyncio.gather(*(service.handle(g, place) for g in ids), return_exceptions=True)
    assert all(isinstance(r, StoreUnavailable) for r in results), results
    failed = [r for r in caplog.records if r.getMessage() == "commit round failed"]
    assert len(failed) == 2 and all(r.exc_info and "device is gone" in str(r.exc_info[1]) for r in failed)
    assert [await store.version(g) for g in ids] == [1, 1]
    Failing.fail = False
    assert [(await service.handle(g, place)).version for g in ids] == [2, 2]


Raw = dict[str, Any]


def _with_proof(line: bytes, change: Any) -> bytes:
    """The line with its proof's JSON object changed by `change` (the body left as it is)."""
    split = envelope.split_proof(line)
    assert split is not None
    proof: Raw = msgspec.json.decode(split[1])
    change(proof)
    return envelope.with_proof(split[0], msgspec.json.encode(proof))


def _flip(hex_hash: str) -> str:
    return ("0" if hex_hash[0] != "0" else "1") + hex_hash[1:]


@pytest.fixture
async def batch() -> tuple[dict[str, list[bytes]], Keyring]:
    """Four games whose second envelopes were signed in one batch."""
    store = MemoryEventStore()
    service = Games(store)
    ids = await _games(service, 4)
    await _place_everywhere(service, ids, 0)
    await _place_everywhere(service, ids, 1)
    return await _stored(store, ids), Keyring.of(service.node.signer)


@pytest.mark.parametrize(
    ("name", "change", "problem"),
    [
        ("a path hash", lambda p: p["path"].__setitem__(0, _flip(p["path"][0])), "bad signature"),
        ("the root", lambda p: p.__setitem__("root", _flip(p["root"])), "bad signature"),
        ("the index", lambda p: p.__setitem__("index", p["index"] ^ 1), "bad signature"),
        ("the size", lambda p: p.__setitem__("size", p["size"] + 1), "cannot be one of leaf 0 of 5"),
        ("the size shrunk", lambda p: p.__setitem__("size", 3), "bad checkpoint signature"),
        ("the time", lambda p: p.__setitem__("at", "2020-01-01T00:00:00.000Z"), "bad checkpoint signature"),
        ("a path cut short", lambda p: p["path"].pop(), "cannot be one of leaf"),
        ("a hash too many", lambda p: p["path"].append(p["root"]), "cannot be one of leaf"),
        ("a hash not 32 bytes", lambda p: p["path"].__setitem__(0, "abcd"), "not 32 bytes"),
        (
            "the signature",
            lambda p: p.__setitem__("sig", base64.b64encode(bytes(64)).decode()),
            "bad checkpoint",
        ),
        ("the proof's shape", lambda p: p.pop("root"), "not an inclusion path"),
    ],
)
async def test_any_part_of_a_proof_altered_is_found_at_its_version(
    batch: tuple[dict[str, list[bytes]], Keyring], name: str, change: Any, problem: str
) -> None:
    games, keys = batch
    lines = next(iter(games.values()))
    forged = [*lines[:2], _with_proof(lines[2], change), *lines[3:]]
    report = verify(forged, keys=keys)
    assert (report.ok, report.bad_version) == (False, 3), name
    assert problem in (report.problem or ""), (name, report.problem)


async def test_a_checkpoint_and_path_moved_to_another_envelope_of_the_batch_are_found(
    batch: tuple[dict[str, list[bytes]], Keyring],
) -> None:
    games, keys = batch
    first, second = list(games.values())[:2]
    split = envelope.split_proof(second[2])
    assert split is not None
    moved = envelope.split_proof(first[2])
    assert moved is not None
    forged = [*first[:2], envelope.with_proof(moved[0], split[1]), *first[3:]]
    report = verify(forged, keys=keys)
    assert (report.ok, report.bad_version) == (False, 3) and "bad signature" in (report.problem or "")


async def test_a_body_followed_by_more_than_its_proof_is_refused(
    batch: tuple[dict[str, list[bytes]], Keyring],
) -> None:
    games, keys = batch
    lines = next(iter(games.values()))
    split = envelope.split_proof(lines[1])
    assert split is not None
    body, proof = split
    signed_twice = body[:-1] + b',"sig":"' + base64.b64encode(bytes(64)) + b'"}'
    report = verify([lines[0], envelope.with_proof(signed_twice, proof), *lines[2:]], keys=keys)
    assert (report.ok, report.bad_version) == (False, 2)
    assert "only field after it" in (report.problem or "")


def _signed_alone(lines: list[bytes], signer: Signer) -> list[bytes]:
    """The same game as a server that signed each envelope on its own wrote it (before batches): each
    line its body and its own signature, chained over whole lines."""
    out: list[bytes] = []
    for line in lines:
        raw: Raw = msgspec.json.decode(line)
        raw.pop("proof")
        raw["prev"] = hashlib.sha256(out[-1]).hexdigest() if out else envelope.GENESIS
        out.append(signer.sign(ENVELOPE, msgspec.json.encode({**raw, "sig": None})))
    return out


async def test_games_signed_one_envelope_at_a_time_still_verify_and_continue_in_batches() -> None:
    store = MemoryEventStore()
    service = Games(store)
    (game_id,) = await _games(service, 1)
    await _place_everywhere(service, [game_id], 0)
    signer = service.node.signer
    old = _signed_alone([r.data for r in await store.read(game_id)], signer)
    assert all(b'"proof"' not in line and line.endswith(b'=="}') for line in old)
    keys = Keyring.of(signer)
    assert verify(old, keys=keys).ok
    tampered = old[1].replace(b'"seat":0', b'"seat":1', 1)
    report = verify([old[0], tampered], keys=keys)
    assert (report.ok, report.bad_version) == (False, 2) and "bad signature" in (report.problem or "")

    upgraded = MemoryEventStore()
    await upgraded.create(game_id, old[0], {})
    await append(upgraded, game_id, 1, old[1:], "k1")
    later = Games(upgraded, signer=signer)
    await _place_everywhere(later, [game_id], 1)
    await later.handle(game_id, EndGame(seat=0, id="end"))
    mixed = [r.data for r in await upgraded.read(game_id)]
    assert mixed[:2] == old and all(envelope.decode(line).proof is not None for line in mixed[2:])
    assert verify(mixed, keys=keys, complete=True).ok
