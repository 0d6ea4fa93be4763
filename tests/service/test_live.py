"""A live game's encoded view: encoded space by space, it must equal encoding the whole view at once."""

from __future__ import annotations

import random

import msgspec

from domain import InstrumentToken, PerformanceToken, Place, Rejected, RepairToken
from projections import render
from server.memory_store import MemoryEventStore
from server.service import GameService

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
