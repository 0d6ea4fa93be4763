"""Take-back through the engine, without sockets: decided by the domain, folded, fanned out as deltas and
whole views that equal the view re-folded from the stream, on the node that wrote it and on another."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import msgspec
import pytest

from domain import (
    CannotTakeBack,
    InstrumentToken,
    LimitReached,
    PerformanceToken,
    Place,
    RepairToken,
    TakeBack,
)
from orchestra_client import apply_delta
from server.engine.games import Games
from server.engine.owner import Follower, LiveGame, Outcome
from server.engine.signing import Keyring
from server.ops.verify import verify
from server.protocol import envelope
from server.store.memory import MemoryEventStore
from tests.support import forgery
from tests.support.waiting import until

CLASSICAL = PerformanceToken(era="classical")
STRINGS = RepairToken(family="strings")
RARE_STRINGS = InstrumentToken(instrument="rare_strings")


class Collecting:
    """A follower's outbox that keeps what it is given, decoded."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def put(self, data: bytes) -> None:
        self.frames.append(msgspec.json.decode(data))


def place(seat: int, id: str, token: Any = CLASSICAL, space: str = "viola") -> Place:
    return Place(seat=seat, id=id, token=token, space=space)


def submit(game: LiveGame, command: Place | TakeBack) -> asyncio.Future[Outcome]:
    answered: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

    def reply(result: Outcome | Exception) -> None:
        if isinstance(result, Outcome):
            answered.set_result(result)
        else:
            answered.set_exception(result)

    game.submit(command, reply)
    return answered


async def live(games: Games, players: int = 3) -> LiveGame:
    created = await games.create(["Ada", "Ben", "Cy", "Di"][:players])
    game = await games.get(created.game_id)
    assert game is not None
    return game


def view_json(view: object) -> Any:
    return msgspec.json.decode(msgspec.json.encode(view))


async def test_every_view_mode_follows_a_take_back_and_equals_the_view_refolded_from_the_stream() -> None:
    games = Games(MemoryEventStore())
    game = await live(games)
    outboxes = {mode: Collecting() for mode in ("delta", "full", "none")}
    for mode, outbox in outboxes.items():
        game.follow(Follower(outbox, mode))  # type: ignore[arg-type]
    held = msgspec.json.decode(game.view_json)
    commands: list[Place | TakeBack] = [
        place(0, "a1"),
        place(1, "b1", STRINGS),
        place(1, "b2"),  # Ben steals the chair from Ada
        TakeBack(seat=1, id="b3"),  # and gives it back
        Place(seat=2, id="c1", token=RARE_STRINGS, space="rare_strings", materials=("wood",)),
        place(2, "c2", InstrumentToken(instrument="viola")),
        TakeBack(seat=2, id="c3"),
        place(0, "a2", STRINGS),
        TakeBack(seat=0, id="a3"),
    ]
    for command in commands:
        await asyncio.wait_for(submit(game, command), 1)
        version = game.version
        expected = view_json(await games.view_at(game.game_id, version))
        delta = outboxes["delta"].frames[-1]
        held = apply_delta(held, delta["view_delta"])
        assert held == expected, command
        assert outboxes["full"].frames[-1]["view"] == expected
        assert msgspec.json.decode(game.view_json) == expected
        assert "view" not in outboxes["none"].frames[-1] and "view_delta" not in outboxes["none"].frames[-1]
        if isinstance(command, TakeBack):
            event = delta["envelopes"][-1]["event"]
            assert event == {"type": "PlacementTakenBack", "seat": command.seat, "version": version - 1}
            # The view is the one before the placement, and the frame carries no token of the space.
            assert expected == {
                **view_json(await games.view_at(game.game_id, version - 2)),
                "version": version,
            }
            assert delta["view_delta"]["spaces"] == {}
            assert all(
                not added.get("below", added.get("chairs")) for added in delta["view_delta"]["added"].values()
            )
    # Ben's steal taken back: Ada holds the Viola's chair again; Cy's instrument left it.
    assert held["spaces"]["viola"]["chair"] == {
        "seat": 0,
        "token": {"kind": "performance", "era": "classical"},
    }
    assert [s["chairs"] for s in held["scores"]] == [["viola"], [], ["rare_strings"]]
    await games.close()


async def test_a_placement_and_its_take_back_in_one_round_make_one_frame_that_changes_no_space() -> None:
    games = Games(MemoryEventStore())
    game = await live(games)
    await asyncio.wait_for(submit(game, place(0, "a1")), 1)
    outbox = Collecting()
    game.follow(Follower(outbox, "delta"))  # type: ignore[arg-type]
    before = msgspec.json.decode(game.view_json)
    placed, taken = submit(game, place(1, "b1", STRINGS)), submit(game, TakeBack(seat=1, id="b2"))
    assert (await placed).version == 3 and (await taken).version == 4
    (frame,) = outbox.frames
    assert [e["event"]["type"] for e in frame["envelopes"]] == ["PlacedBelowLine", "PlacementTakenBack"]
    assert frame["view_delta"] == {
        "version": 4,
        "ended": False,
        "spaces": {},
        "added": {},
        "score_changes": [],
    }
    assert apply_delta(before, frame["view_delta"]) == {**before, "version": 4}
    await games.close()


async def test_a_take_back_is_refused_unless_it_is_the_seats_placement_and_counts_toward_the_limit() -> None:
    games = Games(MemoryEventStore(), max_placements=3)
    game = await live(games)
    game_id = game.game_id
    with pytest.raises(CannotTakeBack, match="not a placement"):
        await games.handle(game_id, TakeBack(seat=0, id="t0"))
    await games.handle(game_id, place(0, "a1"))
    with pytest.raises(CannotTakeBack, match="seat 0's"):
        await games.handle(game_id, TakeBack(seat=1, id="t1"))
    await games.handle(game_id, TakeBack(seat=0, id="t2"))
    with pytest.raises(CannotTakeBack, match="not a placement"):
        await games.handle(game_id, TakeBack(seat=0, id="t3"))
    await games.handle(game_id, place(1, "b1"))
    with pytest.raises(LimitReached):
        await games.handle(game_id, TakeBack(seat=1, id="t4"))
    # The id of an accepted take-back returns its first answer, even now.
    again = await games.handle(game_id, TakeBack(seat=0, id="t2"))
    assert again.version == 3 and b'"PlacementTakenBack"' in again.envelopes[0]
    assert game.version == 4
    await games.close()


async def test_another_node_loads_the_game_and_takes_back_its_last_placement_and_the_first_node_follows() -> (
    None
):
    store = MemoryEventStore()
    first, second = Games(store), Games(store)
    game = await live(first)
    outbox = Collecting()
    game.follow(Follower(outbox, "delta"))  # type: ignore[arg-type]
    held = msgspec.json.decode(game.view_json)
    # More placements than are applied one by one: the second node folds them in one pass.
    for number in range(12):
        await first.handle(
            game.game_id, place(number % 3, f"p{number}", STRINGS if number % 2 else CLASSICAL)
        )
    await first.handle(game.game_id, place(1, "last", InstrumentToken(instrument="viola")))
    other = await second.get(game.game_id)
    assert other is not None and other.version == 14
    outcome = await second.handle(game.game_id, TakeBack(seat=1, id="undo"))
    assert outcome.version == 15

    await until(lambda: game.version >= 15, 5, "the take-back followed")
    for frame in outbox.frames:
        held = apply_delta(held, frame["view_delta"])
    expected = {**view_json(await first.view_at(game.game_id, 13)), "version": 15}
    assert held == expected
    assert msgspec.json.decode(game.view_json) == expected
    assert msgspec.json.decode(other.view_json) == expected
    await first.close()
    await second.close()


async def test_verify_decides_each_take_back_again() -> None:
    store = MemoryEventStore()
    games = Games(store)
    game = await live(games)
    for command in (place(0, "a1"), TakeBack(seat=0, id="a2"), place(1, "b1"), place(2, "c1", STRINGS)):
        await games.handle(game.game_id, command)
    await games.handle(game.game_id, TakeBack(seat=2, id="c2"))
    lines = [record.data for record in await store.read(game.game_id)]
    keys = Keyring.of(games.node.signer)
    report = verify(lines, game.view, keys=keys)
    assert report.ok, report.problem
    assert report.view == game.view

    def resigned(version: int, event: dict[str, Any], seat: int) -> list[bytes]:
        """The history with one envelope's event rewritten, all signed again with the server's own key."""
        out = list(lines)
        for index in range(version - 1, len(out)):
            raw = msgspec.json.decode(out[index])
            if index == version - 1:
                raw["event"], raw["seat"] = event, seat
            raw["prev"] = envelope.chain_hash(out[index - 1])
            out[index] = forgery.resigned(raw, games.node.signer)
        return out

    # A take-back of another version, of another seat's placement, or after something else: found.
    for version, event, seat in (
        (6, {"type": "PlacementTakenBack", "seat": 2, "version": 4}, 2),
        (6, {"type": "PlacementTakenBack", "seat": 1, "version": 5}, 1),
        (5, {"type": "PlacementTakenBack", "seat": 2, "version": 4}, 2),
    ):
        report = verify(resigned(version, event, seat), keys=keys)
        assert not report.ok and report.bad_version == version, (version, event)
        assert "rules" in (report.problem or ""), report.problem
    await games.close()


# A number in JSON (not digits within a string: hashes, timestamps, ids).
NUMBER = re.compile(rb"(?<=[:,\[])-?\d+(?=[,\]}])")


async def test_a_take_back_frame_after_placement_1000_is_no_larger_than_one_after_placement_10() -> None:
    """Seat 0 takes a rare chair every other placement while seats 1 and 2 contest the Cello (as the size
    test of test_folded.py); every seventh placement is taken back and made again. The take-back's frame
    follows the change (a token leaving, a chair coming back), never the hundreds of tokens in the space."""
    games = Games(MemoryEventStore(), max_placements=2_000)
    game = await live(games)
    frames: list[bytes] = []

    class Sent:
        def put(self, data: bytes) -> None:
            frames.append(data)

    game.follow(Follower(Sent(), "delta"))  # type: ignore[arg-type]
    contest = [1] + [seat for _ in range(600) for seat in (2, 2, 1, 1)]
    taken: list[tuple[int, str]] = []  # (frame index, kind of the placement taken back)
    for number in range(1_100):
        if number % 2 == 0:
            command = Place(
                seat=0, id=f"c{number:04}", token=InstrumentToken("rare_winds"), space="rare_winds"
            )
        else:
            command = Place(seat=contest[number // 2], id=f"c{number:04}", token=STRINGS, space="cello")
        placed = await games.handle(game.game_id, command)
        if number % 7 == 3:
            kind = msgspec.json.decode(placed.envelopes[0])["event"]
            await games.handle(game.game_id, TakeBack(seat=command.seat, id=f"t{number:04}"))
            taken.append((len(frames) - 1, f"{kind['type']}:{kind.get('reason', kind['space'])}"))
            await games.handle(game.game_id, msgspec.structs.replace(command, id=f"r{number:04}"))
    assert game.view.scores[0].chairs.count("rare_winds") == 550

    def sizes(start: int) -> dict[str, tuple[int, int]]:
        """The first take-back frame of each kind from frame `start` on: its size, and its size with every
        number written in one digit."""
        found: dict[str, tuple[int, int]] = {}
        for index, kind in taken:
            if index >= start:
                frame = frames[index]
                assert b'"PlacementTakenBack"' in frame
                found.setdefault(kind, (len(frame), len(NUMBER.sub(b"0", frame))))
        return found

    early, late = sizes(10), sizes(1_000)
    assert set(early) == set(late) and len(early) >= 3, early
    for kind, (size, shape) in early.items():
        late_size, late_shape = late[kind]
        assert late_shape <= shape, kind
        assert late_size <= size + 20, kind  # only numbers grow: versions, indices, counts
        assert late_size < 1_000
    await games.close()
