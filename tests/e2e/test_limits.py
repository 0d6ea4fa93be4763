"""Each limit of protocol.md's table, configured small, and what a client sees when it is reached."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from orchestra_client import ConnectionRefused, GameClient, get_events, get_presence, get_view
from orchestra_client import session as client_session
from orchestra_client.bots import random_placement, read_layout
from server.config import Settings
from tests.support.e2e import (
    PERF,
    REJECTION_KEYS,
    STRINGS,
    assert_clean_logs,
    expect_accepted,
    new_game,
    next_answer,
    stalled_spectator,
)
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

MAX_FRAME = 1024
RATE = 5
HELLO_TIMEOUT = 0.5
MAX_CONNECTIONS = 2
MAX_PLACEMENTS = 3
QUEUE_LIMIT = 5


@pytest.fixture(scope="module")
def small(start_module_server: Any) -> Any:
    """A server with every limit but the outgoing queue set small."""
    return start_module_server(
        max_frame_bytes=MAX_FRAME,
        rate_per_second=RATE,
        rate_burst=RATE,
        hello_timeout=HELLO_TIMEOUT,
        max_connections_per_game=MAX_CONNECTIONS,
        max_placements=MAX_PLACEMENTS,
    )


def ws_url(base: str, game_id: str) -> str:
    return base.replace("http://", "ws://") + f"/games/{game_id}/ws"


def frame_of(size: int, id: str = "sized") -> str:
    """A valid place frame padded with whitespace to exactly `size` bytes."""
    text = json.dumps({"type": "place", "id": id, "token": PERF, "space": "viola"})
    return text[:-1] + " " * (size - len(text)) + "}"


async def closed_code(ws: websockets.ClientConnection, timeout: float = 5.0) -> int | None:
    """Read (and drop) frames until the server closes; its close code."""

    async def drain() -> int | None:
        try:
            while True:
                await ws.recv()
        except ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd else None

    return await asyncio.wait_for(drain(), timeout)


async def test_a_frame_of_exactly_the_limit_is_decided(small: Any) -> None:
    game_id, tokens = await new_game(small.url, ["Ada"])
    async with await GameClient.connect(small.url, game_id, tokens[0], reconnect=False) as ada:
        await ada.send_raw(frame_of(MAX_FRAME))
        expect_accepted(await next_answer(ada))


async def test_a_frame_over_the_limit_is_too_large_and_the_socket_stays_usable(small: Any) -> None:
    game_id, tokens = await new_game(small.url, ["Ada"])
    async with await GameClient.connect(small.url, game_id, tokens[0], reconnect=False) as ada:
        await ada.send_raw(frame_of(MAX_FRAME + 1))
        answer = await next_answer(ada)
        assert set(answer) == REJECTION_KEYS
        assert (answer["code"], answer["id"], answer["version"]) == ("too_large", None, 1)
        assert str(MAX_FRAME) in answer["message"]
        expect_accepted(await ada.place(PERF, "viola"))


async def test_a_frame_far_over_the_limit_is_closed_with_1009(small: Any) -> None:
    game_id, tokens = await new_game(small.url, ["Ada"])
    async with await GameClient.connect(small.url, game_id, tokens[0], reconnect=False) as ada:
        await ada.send_raw(frame_of(100 * MAX_FRAME))
        with pytest.raises(ConnectionRefused) as closed:
            await ada.next_frame(timeout=5)
        assert closed.value.code == 1009
    assert (await get_view(small.url, game_id))["version"] == 1


async def test_commands_past_the_burst_are_rate_limited_and_the_bucket_refills(small: Any) -> None:
    game_id, tokens = await new_game(small.url, ["Ada", "Ben"])
    async with await GameClient.connect(small.url, game_id, tokens[0], reconnect=False) as ada:
        for n in range(3 * RATE):
            await ada.send_raw(json.dumps({"type": "end_game", "id": f"r-{n}", "expected_version": 0}))
        answers = [await next_answer(ada) for _ in range(3 * RATE)]
        codes = [a["code"] for a in answers]
        assert codes[:RATE] == ["stale_version"] * RATE
        assert codes.count("rate_limited") >= RATE  # a few tokens may refill while the flood is read
        limited = next(a for a in answers if a["code"] == "rate_limited")
        assert limited["id"].startswith("r-") and limited["version"] == 1
        await asyncio.sleep(1.2)  # the bucket refills at RATE a second, up to the burst
        for space in ("viola", "clarinet", "timpani"):
            expect_accepted(await ada.place(PERF, space))


async def test_a_connection_that_never_says_hello_is_closed_with_1008_after_the_timeout(small: Any) -> None:
    game_id, _ = await new_game(small.url, ["Ada"])
    started = time.monotonic()
    async with websockets.connect(ws_url(small.url, game_id), open_timeout=5) as silent:
        assert await closed_code(silent) == 1008
    elapsed = time.monotonic() - started
    assert HELLO_TIMEOUT * 0.8 <= elapsed < HELLO_TIMEOUT + 3


async def test_a_first_frame_that_is_not_hello_is_closed_with_1008(small: Any) -> None:
    game_id, _ = await new_game(small.url, ["Ada"])
    async with websockets.connect(ws_url(small.url, game_id), open_timeout=5) as ws:
        await ws.send(json.dumps({"type": "place", "id": "a", "token": PERF, "space": "viola"}))
        assert await closed_code(ws) == 1008


async def test_an_unknown_game_is_rejected_then_closed_with_1008(small: Any) -> None:
    async with websockets.connect(ws_url(small.url, "no-such-game"), open_timeout=5) as ws:
        await ws.send(json.dumps({"type": "hello", "token": None, "since": None}))
        refusal = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert set(refusal) == REJECTION_KEYS
        assert (refusal["type"], refusal["code"], refusal["id"]) == ("rejected", "unknown_game", None)
        assert await closed_code(ws) == 1008


async def test_a_token_of_another_game_is_forbidden_then_closed_with_1008(small: Any) -> None:
    game_id, _ = await new_game(small.url, ["Ada"])
    _, other_tokens = await new_game(small.url, ["Ben"])
    with pytest.raises(ConnectionRefused) as refused:
        await GameClient.connect(small.url, game_id, other_tokens[0], reconnect=False)
    assert refused.value.code == 1008
    assert refused.value.frame is not None
    assert (refused.value.frame["code"], refused.value.frame["id"]) == ("forbidden", None)


async def test_connections_past_the_game_maximum_are_unavailable_and_closed_with_1013(small: Any) -> None:
    game_id, tokens = await new_game(small.url, ["Ada"])
    # A connection that has not said hello yet does not count.
    async with websockets.connect(ws_url(small.url, game_id), open_timeout=5):
        first = await GameClient.connect(small.url, game_id, tokens[0], reconnect=False)
        second = await GameClient.connect(small.url, game_id, reconnect=False)
    with pytest.raises(ConnectionRefused) as refused:
        await GameClient.connect(small.url, game_id, reconnect=False)
    assert refused.value.code == 1013
    assert refused.value.frame is not None
    assert (refused.value.frame["code"], refused.value.frame["id"]) == ("unavailable", None)
    # The two already in are unaffected, and other games are not limited by this one.
    answer = await first.place(PERF, "viola")
    assert answer["type"] == "accepted", answer
    await second.wait_for_version(answer["version"], timeout=5)
    other_id, _ = await new_game(small.url, ["Cy"])
    async with await GameClient.connect(small.url, other_id, reconnect=False) as elsewhere:
        assert elsewhere.welcome["role"] == "spectator"
    await first.close()
    # A freed place can be taken again.
    async with await GameClient.connect(small.url, game_id, reconnect=False) as third:
        assert third.welcome["version"] == answer["version"]
    await second.close()


async def test_a_placement_past_the_game_maximum_is_limit_reached(small: Any) -> None:
    game_id, tokens = await new_game(small.url, ["Ada"])
    async with await GameClient.connect(small.url, game_id, tokens[0], reconnect=False) as ada:
        for space in ("viola", "clarinet", "timpani"):
            expect_accepted(await ada.place(PERF, space))
        refused = await ada.place(STRINGS, "cello", id="one-too-many")
        assert (refused["code"], refused["id"], refused["version"]) == ("limit_reached", "one-too-many", 4)
        assert (await get_view(small.url, game_id))["version"] == 4


async def test_a_client_that_never_reads_is_closed_with_1013_while_others_keep_receiving(
    start_module_server: Any,
) -> None:
    server = start_module_server(
        queue_limit=QUEUE_LIMIT, rate_per_second=100_000, rate_burst=100_000, max_placements=100_000
    )
    game_id, tokens = await new_game(server.url, ["Ada"])
    ada = await GameClient.connect(server.url, game_id, tokens[0], reconnect=False)
    fast = await GameClient.connect(server.url, game_id, reconnect=False)
    slow = await stalled_spectator(server.url, game_id)
    try:
        placements = 600
        for n in range(placements):
            answer = await ada.place(PERF, ("viola", "clarinet", "timpani")[n % 3])
            assert answer["type"] == "accepted", answer
        last = placements + 1
        await fast.wait_for_version(last, timeout=20)
        assert [e["version"] for e in fast.envelopes] == list(range(2, last + 1))
        assert fast.envelopes == (await get_events(server.url, game_id))[1:]
        slow.transport.resume_reading()
        received = 0

        async def drain() -> int | None:
            nonlocal received
            try:
                while True:
                    await slow.recv()
                    received += 1
            except ConnectionClosed as exc:
                return exc.rcvd.code if exc.rcvd else None

        assert await asyncio.wait_for(drain(), 10) == 1013
        assert received < placements
        # The players and the fast spectator are still served.
        answer = await ada.place(PERF, "viola")
        await fast.wait_for_version(answer["version"], timeout=5)
        async with httpx.AsyncClient(base_url=server.url) as http:
            metrics = (await http.get("/metrics")).text
        assert re.search(r"^orchestra_broadcast_drops_total [1-9]", metrics, re.MULTILINE)
    finally:
        await slow.close()
        await ada.close()
        await fast.close()
    assert_clean_logs(server.logs())


async def _drops(url: str) -> int:
    async with httpx.AsyncClient(base_url=url) as http:
        metrics = (await http.get("/metrics")).text
    found = re.search(r"^orchestra_broadcast_drops_total (\S+)", metrics, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


async def test_a_client_closed_as_too_slow_that_never_reads_again_is_let_go_and_then_cut_off(
    start_module_server: Any,
) -> None:
    """Its close frame waits behind what it has not read. The session ends at once all the same (the
    game stops counting it), and once ORCHESTRA_SLOW_CLOSE_GRACE has passed the connection is cut: the
    client, reading again, finds no close frame. (Waiting for the client to take its close frame, the
    session would last until uvicorn's keepalive gave up, 20 to 40 s later.)"""
    grace = 1.0
    server = start_module_server(
        queue_limit=QUEUE_LIMIT,
        rate_per_second=100_000,
        rate_burst=100_000,
        max_placements=100_000,
        slow_close_grace=grace,
    )
    game_id, tokens = await new_game(server.url, ["Ada"])
    ada = await GameClient.connect(server.url, game_id, tokens[0], reconnect=False)
    slow = await stalled_spectator(server.url, game_id)
    try:
        assert (await get_presence(server.url, game_id))["spectators"] == 1
        for n in range(2000):
            expect_accepted(await ada.place(PERF, ("viola", "clarinet", "timpani")[n % 3]))
            if n % 50 == 49 and await _drops(server.url) == 1:
                break
        assert await _drops(server.url) == 1

        async def session_ended() -> bool:
            return bool((await get_presence(server.url, game_id))["spectators"] == 0)

        await until(session_ended, 5, "the session ended at the drop")
        await asyncio.sleep(grace + 1.0)  # past the grace, whose passing is the subject
        slow.transport.resume_reading()
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(slow.recv(), 10)
        assert closed.value.rcvd is None  # cut off: the close frame was still behind what it had not read
        # The player is still served.
        expect_accepted(await ada.place(PERF, "viola"))
    finally:
        await slow.close()
        await ada.close()
    assert_clean_logs(server.logs())


@pytest.mark.parametrize("view", ["bogus", "patch", "PATCH", "Delta", "FULL", 1, None, {"patch": True}])
async def test_a_hello_asking_for_an_unknown_view_mode_is_closed_with_1008(small: Any, view: object) -> None:
    game_id, _ = await new_game(small.url, ["Ada"])
    async with websockets.connect(ws_url(small.url, game_id), open_timeout=5) as ws:
        await ws.send(json.dumps({"type": "hello", "token": None, "since": None, "view": view}))
        assert await closed_code(ws) == 1008


async def test_a_resume_refused_as_full_is_retried_until_a_place_frees(
    small: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1013 ("try again later") before a welcome is not final: the client keeps resuming, with backoff.
    # Waits at their ceiling (no jitter) and a first one of 0.5 s: the squatter below gets in first.
    monkeypatch.setattr(client_session, "BACKOFF_BASE", 0.5)
    waits: list[float] = []  # each resume attempt's wait, drawn just before it

    def ceiling(low: float, high: float) -> float:
        waits.append(high)
        return high

    monkeypatch.setattr(random, "uniform", ceiling)  # the client draws its jitter here
    game_id, tokens = await new_game(small.url, ["Ada", "Ben"])
    ada = await GameClient.connect(small.url, game_id, tokens[0])
    ben = await GameClient.connect(small.url, game_id, tokens[1], reconnect=False)
    squatter: GameClient | None = None
    try:
        await ada.drop()

        async def squat() -> GameClient | None:  # in once the server has seen Ada go
            try:
                return await GameClient.connect(small.url, game_id, reconnect=False)
            except ConnectionRefused as refused:
                assert refused.code == 1013
                return None

        squatter = await until(squat, 0.4, "a place freed by Ada's drop")
        assert squatter is not None
        expect_accepted(await ben.place(PERF, "viola"))
        # Ada's first resume was refused (the game is full): she waits for her second.
        await until(lambda: len(waits) >= 2, 5, "Ada's first resume refused")
        assert ada.reconnects == 0 and ada.closed_with is not None
        await squatter.close()
        await ada.wait_for_version(2, timeout=10)
        assert ada.reconnects == 1
        assert [e["version"] for e in ada.envelopes] == [2]
        expect_accepted(await ada.place(STRINGS, "viola"))
    finally:
        for client in (ada, ben, squatter):
            if client is not None:
                await client.close()


async def test_at_the_default_queue_limit_a_stalled_reader_of_whole_views_is_closed_within_a_game(
    start_module_server: Any,
) -> None:
    """The default queue limit is reached within a game of the default size (1,000 placements): a client
    of whole views that stops reading is closed with 1013 once its socket's buffers are full."""
    server = start_module_server(rate_per_second=100_000, rate_burst=100_000)
    assert Settings().queue_limit < Settings().max_placements
    game_id, tokens = await new_game(server.url, ["Ada", "Ben", "Cy", "Dan"])
    players = [await GameClient.connect(server.url, game_id, token, reconnect=False) for token in tokens]
    layout = await read_layout(server.url, game_id)
    slow = await stalled_spectator(server.url, game_id)
    rng = random.Random(19)
    try:
        for number in range(Settings().max_placements):
            frame = {"type": "place", "id": f"p-{number}", **random_placement(layout, rng)}
            answer = await players[number % 4].send(frame)
            assert answer["type"] == "accepted", answer
        slow.transport.resume_reading()
        received = 0
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(slow.recv(), 10)
                received += 1
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        assert received < Settings().max_placements
    finally:
        await slow.close()
        for player in players:
            await player.close()
    assert_clean_logs(server.logs())
