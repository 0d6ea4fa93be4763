"""A live game's encoded view (encoded space by space, it must equal encoding the whole view at once), and
its view deltas: exact, and as large as the change, never as the game."""

from __future__ import annotations

import random
import re

import msgspec
import pytest

from domain import InstrumentToken, PerformanceToken, Place, Rejected, RepairToken, Token
from orchestra_client import DeltaMismatch, apply_delta
from projections import ViewDelta, project, render
from server.config import Settings
from server.engine.folded import SPACES_CACHE_BYTES, Diverged, FoldedGame, GapError
from server.engine.games import Games
from server.engine.owner import Follower
from server.protocol import envelope
from server.protocol.frames import DeltaFrame, EventsFrame, encode
from server.store.memory import MemoryEventStore

CHOICES: list[tuple[Token, str]] = [
    (PerformanceToken("classical"), "viola"),
    (RepairToken("strings"), "viola"),
    (InstrumentToken("viola"), "viola"),
    (InstrumentToken("rare_winds"), "rare_winds"),
    (PerformanceToken("baroque"), "violin_bc"),
    (RepairToken("winds"), "oboe"),
    (PerformanceToken("romantic"), "cello"),
]


async def test_the_view_encoded_space_by_space_is_byte_for_byte_the_whole_view_encoded() -> None:
    service = Games(MemoryEventStore())
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    game = await service.get(game_id)
    assert game is not None
    live = game.folded
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


async def _long_game(service: Games, placements: int) -> FoldedGame:
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    game = await service.get(game_id)
    assert game is not None
    live = game.folded
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


def _cached(live: FoldedGame) -> dict[str, int]:
    return {space_id: len(raw) for space_id, (_, raw) in live._spaces_json.items()}


@pytest.mark.parametrize("budget", [0, 700, 2_000])
async def test_the_encoded_spaces_kept_stay_within_the_budget_and_the_view_stays_exact(budget: int) -> None:
    live = await _long_game(Games(MemoryEventStore(), view_cache_bytes=budget), 200)
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
    live = await _long_game(Games(MemoryEventStore(), view_cache_bytes=1 << 20), 100)
    first = live.view_json
    assert set(_cached(live)) == set(live.board.view.spaces)
    kept = {space_id: raw for space_id, (_, raw) in live._spaces_json.items()}
    assert live.view_json == first
    assert all(live._spaces_json[space_id][1] is raw for space_id, raw in kept.items())


def test_the_default_budget_is_the_settings_default() -> None:
    assert Settings().view_cache_bytes == SPACES_CACHE_BYTES == Games(MemoryEventStore()).view_cache_bytes


async def test_ingest_skips_what_it_has_seen_and_refuses_a_gap() -> None:
    service = Games(MemoryEventStore())
    game_id = (await service.create(["Ada", "Ben"])).game_id
    for i in range(4):
        await service.handle(game_id, Place(seat=i % 2, id=f"p{i}", token=RepairToken("winds"), space="oboe"))
    records = await service.store.read(game_id)
    live = FoldedGame(game_id)
    assert len(live.fold(records[:2])) == 2
    assert len(live.fold(records[:3])) == 1  # versions 1 and 2 again are skipped
    assert len(live.fold(records[:3])) == 0
    with pytest.raises(GapError, match="got version 5 past version 3"):
        live.fold([records[4]])
    with pytest.raises(GapError, match="got version 5 past version 3"):
        live.fold([records[3], records[4], records[4]][1:])
    assert live.version == 3  # a refused batch changes nothing
    assert len(live.fold(records)) == 2
    assert live.view_json == msgspec.json.encode(
        project([envelope.decode(r.data).event for r in records]).view
    )


async def test_a_stream_that_no_longer_holds_what_was_folded_is_refused_and_changes_nothing() -> None:
    """Two writers of one game from version 2 on, as after a store lost this node's version 3: the other
    stream has another line at 3, and its 4 chains to that line, not to this node's."""
    service = Games(MemoryEventStore())
    game_id = (await service.create(["Ada", "Ben"])).game_id
    await service.handle(game_id, Place(seat=0, id="p0", token=RepairToken("winds"), space="oboe"))
    branch = await service.store.read(game_id)
    other = Games(MemoryEventStore())
    await other.store.restore(game_id, [r.data for r in branch], {}, {})
    await service.handle(game_id, Place(seat=1, id="m1", token=RepairToken("winds"), space="oboe"))
    await other.handle(game_id, Place(seat=1, id="t1", token=PerformanceToken("baroque"), space="violin_bc"))
    await other.handle(game_id, Place(seat=0, id="t2", token=RepairToken("strings"), space="viola"))
    ours, theirs = await service.store.read(game_id, 0, 3), await other.store.read(game_id)
    assert [r.version for r in theirs] == [1, 2, 3, 4] and ours[2] != theirs[2]
    live = FoldedGame(game_id)
    live.fold(ours)
    before = (live.version, live.chain_head, live.view_json)
    with pytest.raises(Diverged, match="another line at version 3"):
        live.fold(theirs[2:])  # what a refresh reads: from the version held on
    with pytest.raises(Diverged, match="version 4 does not follow version 3"):
        live.fold(theirs[3:])  # what a tail reads: past the version held
    assert (live.version, live.chain_head, live.view_json) == before
    assert len(live.fold(ours)) == 0  # the lines it holds again: skipped, no complaint


async def test_a_frame_holding_the_view_struct_is_the_frame_holding_the_encoded_view() -> None:
    # A small cache budget: most spaces are encoded for each frame, the rest come from the cache.
    service = Games(MemoryEventStore(), view_cache_bytes=2_000)
    live = await _long_game(service, 200)
    envelopes = [msgspec.Raw(b'{"version":1}'), msgspec.Raw(b'{"version":2}')]
    for _ in range(2):  # and again, with whatever the first pass cached
        assert encode(EventsFrame(envelopes, live.encoded_view())) == encode(
            EventsFrame(envelopes, msgspec.Raw(msgspec.json.encode(live.board.view)))
        )
        assert encode(DeltaFrame(envelopes, live.delta())) == encode(
            DeltaFrame(envelopes, msgspec.Raw(msgspec.json.encode(live.delta())))
        )


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_deltas_applied_as_a_client_does_give_the_view_rendered_from_scratch(seed: int) -> None:
    service = Games(MemoryEventStore(), view_cache_bytes=2_000)
    game_id = (await _long_game(service, 300)).game_id
    records = await service.store.read(game_id)
    live = FoldedGame(game_id, cache_bytes=2_000)
    rng = random.Random(seed)
    # Batches of one command up to more than INCREMENTAL_UP_TO (a catch-up, folded in one pass).
    first = rng.randrange(1, 5)
    live.fold(records[:first])
    by_delta = msgspec.json.decode(live.view_json)
    done = first
    while done < len(records):
        size = rng.choice([1, 1, 1, 2, 3, 9, 20])
        live.fold(records[done : done + size])
        done += size
        delta_json = msgspec.json.encode(live.delta())
        by_delta = apply_delta(by_delta, msgspec.json.decode(delta_json))
        # What is sent is what the published type (and so the schema) says, byte for byte.
        assert msgspec.json.encode(msgspec.json.decode(delta_json, type=ViewDelta)) == delta_json
        rendered = msgspec.json.decode(msgspec.json.encode(render(live.board.game)))
        assert by_delta == rendered, done
    assert live.version == len(records) > 300


# The size test: a game past 1,000 placements where seat 0 takes a rare chair every other placement
# (holding hundreds of them) while seats 1 and 2 contest the Cello, so that a placement below the line
# and a steal by majority come back again and again. Seat 1 and 2 place in pairs (1, 2, 2, 1, 1, 2, ...):
# the second of each pair steals, the first goes below the line.
RARE = (InstrumentToken("rare_winds"), "rare_winds")
CONTESTED = (RepairToken("strings"), "cello")
# A number in JSON (not digits within a string: hashes, timestamps, ids).
NUMBER = re.compile(rb"(?<=[:,\[])-?\d+(?=[,\]}])")


def _kind(frame: bytes) -> tuple[str, int, str]:
    (envelope,) = msgspec.json.decode(frame)["envelopes"]
    event = envelope["event"]
    return event["type"], event["seat"], event.get("reason", event["space"])


async def test_a_delta_frame_after_placement_1000_is_no_larger_than_one_after_placement_10() -> None:
    service = Games(MemoryEventStore(), max_placements=1_200)
    game_id = (await service.create(["Ada", "Ben", "Cy"])).game_id
    game = await service.get(game_id)
    assert game is not None
    live = game.folded
    frames: list[bytes] = []

    class Sent:
        """A delta client's outbox: the frames its game sends it, as encoded."""

        def put(self, data: bytes) -> None:
            frames.append(data)

    game.follow(Follower(Sent(), "delta"))  # type: ignore[arg-type]
    contest = [1] + [seat for _ in range(600) for seat in (2, 2, 1, 1)]
    for number in range(1_100):
        seat, (token, space) = (0, RARE) if number % 2 == 0 else (contest[number // 2], CONTESTED)
        await service.handle(game_id, Place(seat=seat, id=f"c{number:04}", token=token, space=space))
    assert len(frames) == 1_100 and live.board.view.scores[0].chairs.count("rare_winds") == 550

    def sizes(start: int) -> dict[tuple[str, int, str], tuple[int, int]]:
        """The first frame of each kind from placement `start` on: its size, and its size with every
        number written in one digit."""
        found: dict[tuple[str, int, str], tuple[int, int]] = {}
        for frame in frames[start:]:
            found.setdefault(_kind(frame), (len(frame), len(NUMBER.sub(b"0", frame))))
        return found

    early, late = sizes(10), sizes(1_000)
    assert (
        set(early)
        == set(late)
        == {
            ("ChairClaimed", 0, "rare_winds"),
            ("PlacedBelowLine", 1, "no_majority"),
            ("PlacedBelowLine", 2, "no_majority"),
            ("ChairStolen", 1, "majority"),
            ("ChairStolen", 2, "majority"),
        }
    )
    for kind, (size, shape) in early.items():
        late_size, late_shape = late[kind]
        # Only numbers grow (versions, indices, counts, prestige, resources: a few digits each).
        assert late_shape <= shape, kind
        assert late_size <= size + 3 * len(NUMBER.findall(frames[-1])), kind
    # Seat 0 holds 500 rare chairs, which its frames never list (as a score's `chairs` would).
    assert all(b'"rare_winds","rare_winds"' not in frame for frame in frames)
    # The envelope with its proof (a batch of one here: no path) and what changed, whatever came before.
    assert all(len(frame) < 1_200 for frame in frames[1:])


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
