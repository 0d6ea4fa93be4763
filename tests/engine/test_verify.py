"""`verify` finds a broken chain, a wrong version, or an event the rules would not have given."""

from __future__ import annotations

import random

import msgspec
import pytest

from domain import InstrumentToken, PerformanceToken, Place, Rejected, RepairToken
from domain.messages import EndGame
from server.engine import envelope
from server.engine.games import Games
from server.ops.verify import verify
from server.store.memory import MemoryEventStore

CHOICES = [
    (PerformanceToken("classical"), "viola", None),
    (RepairToken("strings"), "viola", None),
    (InstrumentToken("viola"), "viola", None),
    (InstrumentToken("rare_strings"), "rare_strings", ("wood",)),
    (PerformanceToken("baroque"), "violin_bc", None),
    (RepairToken("winds"), "oboe", None),
    (InstrumentToken("violin"), "violin_cr", None),
]


async def _played_game(seed: int = 1, moves: int = 40) -> tuple[MemoryEventStore, str, list[bytes]]:
    store = MemoryEventStore()
    service = Games(store)
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    rng = random.Random(seed)
    for i in range(moves):
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
    await service.handle(game_id, EndGame(seat=0, id="end"))
    return store, game_id, [r.data for r in await store.read(game_id)]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_an_untouched_history_verifies_and_refolds_to_the_live_view(seed: int) -> None:
    store, game_id, lines = await _played_game(seed)
    service = Games(store)
    game = await service.get(game_id)
    assert game is not None
    live = game.folded
    assert live is not None
    report = verify(lines, live.board.view)
    assert report.ok, report.problem
    assert report.envelopes == len(lines) and report.view == live.board.view


def _rewrite(lines: list[bytes], version: int, change: dict[str, object], rechain: bool) -> list[bytes]:
    """Tamper with one envelope's event; with `rechain`, also rewrite every later prev (a careful forger)."""
    out = list(lines)
    raw = msgspec.json.decode(out[version - 1])
    raw["event"].update(change)
    out[version - 1] = msgspec.json.encode(raw)
    if rechain:
        for i in range(version, len(out)):
            later = msgspec.json.decode(out[i])
            later["prev"] = envelope.chain_hash(out[i - 1])
            out[i] = msgspec.json.encode(later)
    return out


async def test_a_tampered_bonus_is_found_at_its_version_through_the_chain() -> None:
    _, _, lines = await _played_game()
    tampered = _rewrite(lines, 5, {"seat": 2}, rechain=False)
    report = verify(tampered)
    assert not report.ok and report.bad_version in (5, 6)
    assert report.bad_version == 6 or "seat" in (report.problem or "")


async def test_a_forged_event_with_a_rewritten_chain_is_found_by_the_rules() -> None:
    _, _, lines = await _played_game()
    victim = next(i for i, line in enumerate(lines) if b'"ChairClaimed"' in line) + 1
    tampered = _rewrite(lines, victim, {"bonus": {"money": 99}}, rechain=True)
    report = verify(tampered)
    assert not report.ok and report.bad_version == victim
    assert "rules give" in (report.problem or "")


async def test_a_missing_envelope_is_reported_as_a_version_gap() -> None:
    _, _, lines = await _played_game()
    report = verify(lines[:3] + lines[4:])
    assert not report.ok and report.bad_version == 4


async def test_a_live_view_that_differs_from_the_refold_is_reported() -> None:
    store, game_id, lines = await _played_game()
    other_store, other_id, _ = await _played_game(seed=9)
    other = await Games(other_store).get(other_id)
    assert other is not None
    report = verify(lines, other.folded.board.view)
    assert not report.ok and "live view differs" in (report.problem or "")


def test_no_envelopes_is_no_game() -> None:
    assert verify([]).problem == "no envelopes: no such game"


def test_an_unreadable_envelope_is_reported() -> None:
    report = verify([b"{not json"])
    assert not report.ok and report.bad_version == 1 and "unreadable" in (report.problem or "")
