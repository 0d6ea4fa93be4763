"""`verify` finds a bad signature, a broken chain, a wrong version, a truncation, or an event the rules
would not have given, at the first bad version; and accepts what the server signed, across key rotation."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest

from domain import InstrumentToken, PerformanceToken, Place, Rejected, RepairToken
from domain.messages import EndGame, Token
from domain.vocabulary import Material
from server.engine.games import Games
from server.engine.notary import proof_problem
from server.engine.signing import Keyring, Signer
from server.engine.trailer import trailer_line
from server.ops.verify import verify
from server.protocol import envelope
from server.store.memory import MemoryEventStore
from tests.support.appends import append
from tests.support.forgery import resigned

CHOICES: list[tuple[Token, str, tuple[Material, ...] | None]] = [
    (PerformanceToken("classical"), "viola", None),
    (RepairToken("strings"), "viola", None),
    (InstrumentToken("viola"), "viola", None),
    (InstrumentToken("rare_strings"), "rare_strings", ("wood",)),
    (PerformanceToken("baroque"), "violin_bc", None),
    (RepairToken("winds"), "oboe", None),
    (InstrumentToken("violin"), "violin_cr", None),
]


async def _play(service: Games, game_id: str, seed: int, moves: int, first_id: int = 0) -> None:
    rng = random.Random(seed)
    for i in range(first_id, first_id + moves):
        token, space, materials = rng.choice(CHOICES)
        skill = rng.randint(1, 8)
        if materials is not None and skill >= 6:
            materials = ("metal", "metal")
        command = Place(
            seat=rng.randrange(3),
            id=f"c{i}",
            token=token,
            space=space,
            skill=skill,
            consolation=rng.choice(["money", "inspiration"]),
            materials=materials,
        )
        try:
            await service.handle(game_id, command)
        except Rejected:
            pass


async def _played_game(
    seed: int = 1, moves: int = 40, end: bool = True, signer: Signer | None = None
) -> tuple[MemoryEventStore, str, list[bytes], Keyring]:
    store = MemoryEventStore()
    service = Games(store, signer=signer)
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    await _play(service, game_id, seed, moves)
    if end:
        await service.handle(game_id, EndGame(seat=0, id="end"))
    return store, game_id, [r.data for r in await store.read(game_id)], Keyring.of(service.node.signer)


def _raw(line: bytes) -> dict[str, Any]:
    raw: dict[str, Any] = msgspec.json.decode(line)
    return raw


def _resign(raw: dict[str, Any], signer: Signer) -> bytes:
    """An envelope signed by `signer`, as someone holding that key would sign it."""
    return resigned(raw, signer)


def _forge(
    lines: list[bytes], version: int, change: Any, *, signer: Signer | None = None, strip: bool = False
) -> list[bytes]:
    """What a writer of the store can do: change one envelope (`change(raw)` edits its JSON object), then
    rewrite every later `prev` so the chain holds; with `signer`, re-sign every rewritten envelope with
    that key; with `strip`, drop the signatures of every envelope instead."""
    out = list(lines)
    for i in range(len(out)):
        raw = _raw(out[i])
        touched = i + 1 >= version
        if i + 1 == version:
            change(raw)
        if i + 1 > version:
            raw["prev"] = envelope.chain_hash(out[i - 1])
        if strip:
            raw.pop("key", None)
            raw.pop("sig", None)
            raw.pop("proof", None)
            raw["prev"] = envelope.chain_hash(out[i - 1]) if i else envelope.GENESIS
            out[i] = msgspec.json.encode(raw)
        elif touched:
            out[i] = _resign(raw, signer) if signer is not None else msgspec.json.encode(raw)
    return out


def _version_of(lines: list[bytes], kind: str) -> int:
    return next(i for i, line in enumerate(lines) if f'"type":"{kind}"'.encode() in line) + 1


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_an_untouched_history_verifies_and_refolds_to_the_live_view(seed: int) -> None:
    store, game_id, lines, keys = await _played_game(seed)
    game = await Games(store).get(game_id)
    assert game is not None
    report = verify(lines, game.view, keys=keys, game_id=game_id, complete=True)
    assert report.ok, report.problem
    assert report.envelopes == len(lines) and report.view == game.view
    assert report.ended and report.unsigned == 0


async def test_every_stored_envelope_carries_a_proof_of_the_node_key_over_its_line_up_to_the_proof() -> None:
    _, _, lines, keys = await _played_game(moves=5)
    for line in lines:
        item = envelope.decode(line)
        assert item.key is not None and item.key == keys.current
        assert item.sig is None and item.proof is not None
        body, proof = line[: line.rindex(b',"proof":')] + b"}", line[line.rindex(b',"proof":') + 9 : -1]
        assert envelope.split_proof(line) == (body, proof)
        fields = msgspec.json.decode(line)
        assert msgspec.json.decode(body) == {k: v for k, v in fields.items() if k != "proof"}
        assert proof_problem(keys, item.key, body, proof) is None
        assert proof_problem(keys, item.key, body.replace(b'"seat":', b'"seat": '), proof) is not None


async def test_a_chair_moved_to_another_seat_is_found_at_its_version_even_with_the_chain_rewritten() -> None:
    _, _, lines, keys = await _played_game()
    victim = _version_of(lines, "ChairClaimed")

    def move(raw: dict[str, Any]) -> None:
        raw["event"]["seat"] = raw["seat"] = (raw["seat"] + 1) % 3

    report = verify(_forge(lines, victim, move), keys=keys)
    assert not report.ok and report.bad_version == victim
    assert "bad signature" in (report.problem or "")


async def test_a_bonus_raised_together_with_the_layout_of_game_created_is_found_at_version_1() -> None:
    _, _, lines, keys = await _played_game()
    victim = _version_of(lines, "ChairClaimed")
    space = _raw(lines[victim - 1])["event"]["space"]

    def richer(raw: dict[str, Any]) -> None:
        for item in raw["event"]["layout"]["spaces"]:
            if item["id"] == space:
                item["bonus"]["money"] = item["bonus"].get("money", 0) + 10

    forged = _forge(lines, 1, richer)
    for i in range(1, len(forged)):  # and every claim of that space, chained again
        raw = _raw(forged[i])
        if raw["event"].get("space") == space and "bonus" in raw["event"]:
            raw["event"]["bonus"]["money"] = raw["event"]["bonus"].get("money", 0) + 10
        raw["prev"] = envelope.chain_hash(forged[i - 1])
        forged[i] = msgspec.json.encode(raw)
    report = verify(forged, keys=keys)
    assert not report.ok and report.bad_version == 1
    assert "bad signature" in (report.problem or "")


async def test_forged_command_ids_and_times_are_found_at_their_version() -> None:
    _, _, lines, keys = await _played_game()
    for field, value in (("command_id", "someone-else"), ("at", "2020-01-01T00:00:00.000Z")):
        forged = _forge(lines, 7, lambda raw, f=field, v=value: raw.__setitem__(f, v))
        report = verify(forged, keys=keys)
        assert not report.ok and report.bad_version == 7, (field, report.problem)


async def test_a_chain_rehashed_and_resigned_with_another_key_is_found_at_the_first_forged_version() -> None:
    _, _, lines, keys = await _played_game()
    forged = _forge(lines, 4, lambda raw: None, signer=Signer.generate())
    report = verify(forged, keys=keys)
    assert not report.ok and report.bad_version == 4
    assert "not one of the trusted keys" in (report.problem or "")


async def test_stripped_signatures_are_not_signed_and_after_signed_ones_never_pass() -> None:
    _, _, lines, keys = await _played_game()
    stripped = _forge(lines, 1, lambda raw: None, strip=True)
    report = verify(stripped, keys=keys)
    assert not report.ok and report.bad_version == 1 and "not signed" in (report.problem or "")
    tail_stripped = lines[:5] + _forge(lines, 1, lambda raw: None, strip=True)[5:]
    tail_stripped[5] = msgspec.json.encode({**_raw(tail_stripped[5]), "prev": envelope.chain_hash(lines[4])})
    report = verify(tail_stripped, keys=keys, allow_unsigned=True)
    assert not report.ok and report.bad_version == 6 and "after signed" in (report.problem or "")


async def test_an_event_the_key_holder_signed_against_the_rules_is_still_found_by_the_rules() -> None:
    store = MemoryEventStore()
    service = Games(store)
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    await _play(service, game_id, 1, 40)
    lines = [r.data for r in await store.read(game_id)]
    victim = _version_of(lines, "ChairClaimed")
    forged = _forge(
        lines,
        victim,
        lambda raw: raw["event"].__setitem__("bonus", {"money": 99}),
        signer=service.node.signer,
    )
    report = verify(forged, keys=Keyring.of(service.node.signer))
    assert not report.ok and report.bad_version == victim and "rules give" in (report.problem or "")


async def test_dropped_last_envelopes_leave_a_game_that_has_not_ended_and_complete_reports_it() -> None:
    _, _, lines, keys = await _played_game()
    cut = lines[:-2]
    lenient = verify(cut, keys=keys)
    assert lenient.ok and not lenient.ended
    strict = verify(cut, keys=keys, complete=True)
    assert not strict.ok and strict.bad_version == len(cut) + 1 and "truncated" in (strict.problem or "")


async def test_a_trailer_proves_an_export_complete_and_finds_what_was_dropped_before_it() -> None:
    signer = Signer.generate()
    store, game_id, lines, keys = await _played_game(end=False, signer=signer)
    records = await store.read(game_id)
    trailer = trailer_line(game_id, records, "2026-11-30T00:00:00.000Z", signer)
    report = verify([*lines, trailer], keys=keys, complete=True)
    assert report.ok and report.trailer and not report.ended, report.problem
    dropped = verify([*lines[:-1], trailer], keys=keys, complete=True)
    assert not dropped.ok and dropped.bad_version == len(lines)
    assert f"trailer says version {len(lines)}" in (dropped.problem or "")
    raised = trailer.replace(f'"version":{len(lines)}'.encode(), f'"version":{len(lines) - 1}'.encode())
    assert not verify([*lines[:-1], raised], keys=keys).ok


async def test_a_game_signed_before_a_key_rotation_verifies_with_the_retired_key_listed() -> None:
    store = MemoryEventStore()
    old, new = Signer.generate(), Signer.generate()
    before = Games(store, signer=old)
    game_id = (await before.create(["Ada", "Ben", "Cy"])).game_id
    await _play(before, game_id, 1, 10)
    after = Games(store, signer=new)  # the node restarted with the new key
    await _play(after, game_id, 2, 10, first_id=100)
    lines = [r.data for r in await store.read(game_id)]
    signers = {envelope.decode(line).key for line in lines}
    assert signers == {old.key_id, new.key_id} and envelope.decode(lines[-1]).key == new.key_id
    assert verify(lines, keys=Keyring.of(new, [old.public]), game_id=game_id).ok
    report = verify(lines, keys=Keyring.of(new))
    assert (
        not report.ok and report.bad_version == 1 and "not one of the trusted keys" in (report.problem or "")
    )


async def test_unsigned_envelopes_of_old_games_decode_and_verify_only_when_allowed() -> None:
    _, _, lines, keys = await _played_game()
    legacy = _forge(lines, 1, lambda raw: None, strip=True)
    assert all(b'"sig"' not in line and b'"proof"' not in line for line in legacy)
    assert envelope.decode(legacy[1]).sig is None and envelope.decode(legacy[1]).key is None
    assert not verify(legacy, keys=keys).ok
    report = verify(legacy, keys=keys, allow_unsigned=True, complete=True)
    assert report.ok and report.unsigned == len(legacy) and report.ended


async def test_a_signed_game_continued_from_an_unsigned_one_verifies_with_allow_unsigned() -> None:
    store, game_id, lines, _ = await _played_game(end=False, moves=10)
    legacy = _forge(lines, 1, lambda raw: None, strip=True)
    old_store = MemoryEventStore()
    await old_store.create(game_id, legacy[0], {})
    for version, line in enumerate(legacy[1:], start=1):
        await append(old_store, game_id, version, [line], f"k{version}")
    service = Games(old_store)
    await _play(service, game_id, 5, 10, first_id=200)
    mixed = [r.data for r in await old_store.read(game_id)]
    assert len(mixed) > len(legacy) and envelope.decode(mixed[-1]).proof is not None
    report = verify(mixed, keys=Keyring.of(service.node.signer), allow_unsigned=True)
    assert report.ok and report.unsigned == len(legacy), report.problem


async def test_an_envelope_of_another_game_is_found() -> None:
    _, game_id, lines, keys = await _played_game()
    report = verify(lines, keys=keys, game_id="another-game")
    assert not report.ok and report.bad_version == 1 and "another-game" in (report.problem or "")


async def test_a_missing_envelope_is_reported_as_a_version_gap() -> None:
    _, _, lines, keys = await _played_game()
    report = verify(lines[:3] + lines[4:], keys=keys)
    assert not report.ok and report.bad_version == 4


async def test_a_live_view_that_differs_from_the_refold_is_reported() -> None:
    _, _, lines, keys = await _played_game()
    other_store, other_id, _, _ = await _played_game(seed=9)
    other = await Games(other_store).get(other_id)
    assert other is not None
    report = verify(lines, other.view, keys=keys)
    assert not report.ok and "live view differs" in (report.problem or "")


def test_no_envelopes_is_no_game() -> None:
    assert verify([], keys=Keyring()).problem == "no envelopes: no such game"


def test_an_unreadable_envelope_is_reported() -> None:
    report = verify([b"{not json"], keys=Keyring())
    assert not report.ok and report.bad_version == 1 and "unreadable" in (report.problem or "")
