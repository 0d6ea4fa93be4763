"""The load generator reads only the part of a frame it times: the same fields a full decode gives."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from bench.games import legal_placements, place
from bench.generator import Frame, timed_part
from server.engine.folded import FoldedGame
from server.engine.games import Games
from server.protocol import frames as wire
from server.store.memory import MemoryEventStore

full_decode = msgspec.json.Decoder(Frame).decode

# Names that put the view's key, quotes and braces inside the envelopes' strings.
TRICKY = ['Ada,"view":{}', '"},"view":', "Ben\\", "Cy"]


async def _records() -> tuple[str, list[bytes], bytes, bytes]:
    service = Games(MemoryEventStore(), max_placements=1_000)
    created = await service.create(TRICKY)
    pairs = legal_placements()
    for index in range(40):
        await service.handle(created.game_id, place(index % len(TRICKY), index, pairs))
    records = await service.store.read(created.game_id)
    live = FoldedGame(created.game_id)
    live.fold(records)
    delta = msgspec.json.encode(live.delta())
    return created.game_id, [r.data for r in records], live.view_json, delta


Game = tuple[str, list[bytes], bytes, bytes]


@pytest.fixture(scope="module")
def game() -> Game:
    return asyncio.run(_records())


def _frames(datas: list[bytes], view: bytes, delta: bytes) -> list[bytes]:
    raws = [msgspec.Raw(d) for d in datas]
    return [
        wire.encode(wire.EventsFrame(raws[:1], msgspec.Raw(view))),
        wire.encode(wire.EventsFrame(raws[-3:], msgspec.Raw(view))),
        wire.encode(wire.EventsFrame(raws, msgspec.Raw(view))),
        wire.encode(wire.DeltaFrame(raws[-2:], msgspec.Raw(delta))),
        wire.encode(wire.HistoryFrame(raws)),
        b'{"type":"accepted","id":"c1","first":2,"last":2}',
        b'{"type":"rejected","id":"c2","code":"illegal_space","message":"no"}',
    ]


def test_timed_part_equals_a_full_decode(game: Game) -> None:
    _, datas, view, delta = game
    frames = _frames(datas, view, delta)
    assert any(b'view\\":' in f for f in frames)  # the tricky names did reach the envelopes
    for frame in frames:
        assert timed_part(frame) == full_decode(frame)


@pytest.mark.parametrize("key", ["view", "view_delta"])
def test_timed_part_does_not_parse_the_view_or_the_delta(game: Game, key: str) -> None:
    _, datas, view, delta = game
    envelopes = [msgspec.Raw(datas[-1])]
    frames: dict[str, wire.EventsFrame | wire.DeltaFrame] = {
        "view": wire.EventsFrame(envelopes, msgspec.Raw(view)),
        "view_delta": wire.DeltaFrame(envelopes, msgspec.Raw(delta)),
    }
    frame = frames[key]
    good = wire.encode(frame)
    # A view the meter would choke on if it parsed it: it does not, so the envelopes still come out.
    marker = f',"{key}":'.encode()
    broken = good[: good.index(marker)] + marker + b'{"spaces":[}'
    assert timed_part(broken) == full_decode(good)
    with pytest.raises(msgspec.DecodeError):
        full_decode(broken)
