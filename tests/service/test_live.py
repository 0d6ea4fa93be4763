"""A live game's encoded view: encoded space by space, it must equal encoding the whole view at once."""

from __future__ import annotations

import random

import msgspec
import pytest

from domain import InstrumentToken, PerformanceToken, Place, Rejected, RepairToken
from orchestra_client import DeltaMismatch, apply_delta, apply_patch
from projections import ViewDelta, ViewPatch, project, render
from server.config import Settings
from server.engine import envelope
from server.engine.live import SPACES_CACHE_BYTES, GapError, LiveGame
from server.engine.service import GameService
from server.protocol.frames import DeltaFrame, EventsFrame, PatchFrame, encode
from server.store.memory import MemoryEventStore

CHOICES = [
    (PerformanceToken("classical"), "viola"),
    (RepairToken("strings"), "viola"),
    (InstrumentToken("viola"), "viola"),
    (InstrumentToken("rare_winds"), "rare_winds"),
    (PerformanceToken("baroque"), "violin_bc"),
    (RepairToken("winds"), "oboe"),
    (PerformanceToken("romantic"), "cello"),
]


async def test_the_view_encoded_space_by_space_is_byte_for_byte_the_whole_view_encoded() -> None:
    service = GameService(MemoryEventStore())
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    live = await service.live(game_id)
    assert live is not None
    rng = random.Random(3)
    for i in range(150):
        token, space = rng.choice(CHOICES)
        try:
            await service.handle(game_id, Place(seat=rng.randrange(3), id=f"c{i}", token=token, space=space))
        except Rejected:
            continue
        assert live.view_json == msgspec.json.encode(live.board.view)
        assert msgspec.json.decode(live.view_json) == msgspec.json.decode(
            msgspec.json.encode(render(live.board.game))
        )
    assert live.version > 100


async def _long_game(service: GameService, placements: int) -> LiveGame:
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    live = await service.live(game_id)
    assert live is not None
    rng = random.Random(5)
    while live.version <= placements:
        token, space = rng.choice(CHOICES)
        try:
            await service.handle(
                game_id, Place(seat=rng.randrange(3), id=f"c{live.version}", token=token, space=space)
            )
        except Rejected:
            continue
        assert live.view_json == msgspec.json.encode(live.board.view)
    return live


def _cached(live: LiveGame) -> dict[str, int]:
    return {space_id: len(raw) for space_id, (_, raw) in live._spaces_json.items()}


@pytest.mark.parametrize("budget", [0, 700, 2_000])
async def test_the_encoded_spaces_kept_stay_within_the_budget_and_the_view_stays_exact(budget: int) -> None:
    live = await _long_game(GameService(MemoryEventStore(), view_cache_bytes=budget), 200)
    whole = len(live.view_json)
    assert whole > 2 * budget  # the game has outgrown its budget: some spaces are encoded per frame
    cached = _cached(live)
    assert sum(cached.values()) <= budget
    assert live._cached_bytes == sum(cached.values())
    if budget == 0:
        assert cached == {}
    else:
        assert cached  # within the budget, spaces are still kept


async def test_within_the_budget_every_space_is_kept_and_not_encoded_again() -> None:
    live = await _long_game(GameService(MemoryEventStore(), view_cache_bytes=1 << 20), 100)
    first = live.view_json
    assert set(_cached(live)) == set(live.board.view.spaces)
    kept = {space_id: raw for space_id, (_, raw) in live._spaces_json.items()}
    assert live.view_json == first
    assert all(live._spaces_json[space_id][1] is raw for space_id, raw in kept.items())


def test_the_default_budget_is_the_settings_default() -> None:
    assert (
        Settings().view_cache_bytes == SPACES_CACHE_BYTES == GameService(MemoryEventStore()).view_cache_bytes
    )


async def test_ingest_skips_what_it_has_seen_and_refuses_a_gap() -> None:
    service = GameService(MemoryEventStore())
    game_id = (await service.create(["Ada", "Ben"])).game_id
    for i in range(4):
        await service.handle(game_id, Place(seat=i % 2, id=f"p{i}", token=RepairToken("winds"), space="oboe"))
    records = await service.store.read(game_id)
    live = LiveGame(game_id)
    assert live.ingest(records[:2]) == 2
    assert live.ingest(records[:3]) == 1  # versions 1 and 2 again are skipped
    assert live.ingest(records[:3]) == 0
    with pytest.raises(GapError, match="got version 5 past version 3"):
        live.ingest([records[4]])
    with pytest.raises(GapError, match="got version 5 past version 3"):
        live.ingest([records[3], records[4], records[4]][1:])
    assert live.version == 3  # a refused batch changes nothing
    assert live.ingest(records) == 2
    assert live.view_json == msgspec.json.encode(
        project([envelope.decode(r.data).event for r in records]).view
    )


async def test_a_frame_holding_the_view_struct_is_the_frame_holding_the_encoded_view() -> None:
    # A small cache budget: most spaces are encoded for each frame, the rest come from the cache.
    service = GameService(MemoryEventStore(), view_cache_bytes=2_000)
    live = await _long_game(service, 200)
    envelopes = [msgspec.Raw(b'{"version":1}'), msgspec.Raw(b'{"version":2}')]
    for _ in range(2):  # and again, with whatever the first pass cached
        assert encode(EventsFrame(envelopes, live.encoded_view())) == encode(
            EventsFrame(envelopes, msgspec.Raw(msgspec.json.encode(live.board.view)))
        )
        assert encode(PatchFrame(envelopes, live.encoded_patch())) == encode(
            PatchFrame(envelopes, msgspec.Raw(msgspec.json.encode(live.encoded_patch())))
        )
        assert encode(DeltaFrame(envelopes, live.encoded_delta())) == encode(
            DeltaFrame(envelopes, msgspec.Raw(msgspec.json.encode(live.encoded_delta())))
        )


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_deltas_and_patches_applied_as_a_client_does_give_the_view_rendered_from_scratch(
    seed: int,
) -> None:
    service = GameService(MemoryEventStore(), view_cache_bytes=2_000)
    game_id = (await _long_game(service, 300)).game_id
    records = await service.store.read(game_id)
    live = LiveGame(game_id, cache_bytes=2_000)
    rng = random.Random(seed)
    # Batches of one command up to more than INCREMENTAL_UP_TO (a catch-up, folded in one pass).
    first = rng.randrange(1, 5)
    live.ingest(records[:first])
    by_delta = by_patch = msgspec.json.decode(live.view_json)
    done = first
    while done < len(records):
        size = rng.choice([1, 1, 1, 2, 3, 9, 20])
        live.ingest(records[done : done + size])
        done += size
        delta_json = msgspec.json.encode(live.encoded_delta())
        patch_json = msgspec.json.encode(live.encoded_patch())
        by_delta = apply_delta(by_delta, msgspec.json.decode(delta_json))
        by_patch = apply_patch(by_patch, msgspec.json.decode(patch_json))
        # What is sent is what the published types (and so the schema) say, byte for byte.
        for encoded, kind in ((delta_json, ViewDelta), (patch_json, ViewPatch)):
            assert msgspec.json.encode(msgspec.json.decode(encoded, type=kind)) == encoded
        rendered = msgspec.json.decode(msgspec.json.encode(render(live.board.game)))
        assert by_delta == rendered == by_patch, done
    assert live.version == len(records) > 300


async def test_a_delta_stays_small_as_the_game_grows_where_a_patch_does_not() -> None:
    live = await _long_game(GameService(MemoryEventStore()), 400)
    delta_json = msgspec.json.encode(live.encoded_delta())
    delta = msgspec.json.decode(delta_json)
    (changed,) = live.replaced
    assert delta["spaces"] == {} and list(delta["added"]) == [changed]
    # The scores (each seat's chairs) come whole in both; a patch also repeats the whole space.
    patch_json = msgspec.json.encode(live.encoded_patch())
    assert len(delta_json) < 2_000 and 3 * len(delta_json) < len(patch_json)


def test_a_delta_that_does_not_extend_the_view_held_is_refused() -> None:
    view = {
        "version": 3,
        "spaces": {"viola": {"kind": "standard", "chair": None, "below": [{"seat": 0}]}},
        "scores": [],
    }
    ahead = {"kind": "standard", "chair": None, "below_from": 2, "below": [{"seat": 1}]}
    with pytest.raises(DeltaMismatch, match="viola"):
        apply_delta(view, {"version": 4, "added": {"viola": ahead}})
    with pytest.raises(DeltaMismatch, match="cello"):
        apply_delta(view, {"version": 4, "added": {"cello": {**ahead, "below_from": 0}}})
    rare = {"kind": "rare", "chairs_from": 1, "chairs": []}
    with pytest.raises(DeltaMismatch, match="viola"):
        apply_delta(view, {"version": 4, "added": {"viola": rare}})
    fits = apply_delta(view, {"version": 4, "added": {"viola": {**ahead, "below_from": 1}}})
    assert fits["spaces"]["viola"]["below"] == [{"seat": 0}, {"seat": 1}] and fits["version"] == 4
