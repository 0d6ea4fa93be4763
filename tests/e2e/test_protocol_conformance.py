"""The server does what docs/protocol.md says where a client written from the document alone found it did
not: a refusal of a connection's own frame carries the game's version, never one older than the live
frames it already got (section 3); `?trailer=` is `true` or `false` and nothing else (section 1); and only
creations count against an address's rate: refused bodies (400, 413) do not (section 1)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from orchestra_client import GameClient
from tests.support.e2e import PERF, REJECTION_KEYS, STRINGS, expect_accepted, new_game
from tests.support.redis import RedisProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

MAX_FRAME = 16 * 1024


@pytest.fixture(scope="module")
def api(start_module_server: Any) -> Any:
    """One server with the default settings for the module's websocket and query tests."""
    return start_module_server()


async def greet(url: str, game_id: str, token: str | None) -> ClientConnection:
    """A plain websocket client, welcomed with `view: false`."""
    socket = await websockets.connect(url.replace("http://", "ws://") + f"/games/{game_id}/ws")
    await socket.send(json.dumps({"type": "hello", "token": token, "since": None, "view": False}))
    welcome = json.loads(await asyncio.wait_for(socket.recv(), 5))
    assert welcome["type"] == "welcome" and welcome["version"] == 1, welcome
    return socket


async def live_until(socket: ClientConnection, version: int) -> None:
    """Read live frames until one brings `version`."""
    while True:
        frame = json.loads(await asyncio.wait_for(socket.recv(), 5))
        if frame["type"] == "events" and frame["envelopes"][-1]["version"] >= version:
            return


async def rejection(socket: ClientConnection) -> dict[str, Any]:
    """The next `rejected` frame (presence frames may come before it)."""
    while True:
        frame: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), 5))
        if frame["type"] == "rejected":
            assert set(frame) == REJECTION_KEYS
            return frame


# Section 3: rejected.version ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seat", "frame", "code"),
    [
        pytest.param(1, "x" * (MAX_FRAME + 1), "too_large", id="too-large"),
        pytest.param(1, "{not json", "bad_request", id="bad-request"),
        pytest.param(1, b"\x00", "bad_request", id="binary"),
        pytest.param(1, '{"type": "hello"}', "bad_request", id="second-hello"),
        pytest.param(
            None,
            json.dumps({"type": "place", "id": "s-1", "token": PERF, "space": "viola"}),
            "forbidden",
            id="spectator-command",
        ),
    ],
)
async def test_a_connections_own_refusal_carries_the_games_version_not_its_last_answers(
    api: Any, seat: int | None, frame: str | bytes, code: str
) -> None:
    game_id, tokens = await new_game(api.url, ["Ada", "Ben"])
    # Welcomed at version 1, this client answers nothing until the game is at version 4.
    client = await greet(api.url, game_id, None if seat is None else tokens[seat])
    try:
        async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as ada:
            expect_accepted(await ada.place(PERF, "viola"))
            expect_accepted(await ada.place(STRINGS, "cello"))
            expect_accepted(await ada.place(PERF, "timpani"))
        await live_until(client, 4)
        await client.send(frame)
        refused = await rejection(client)
        assert (refused["code"], refused["version"]) == (code, 4), refused
    finally:
        await client.close()


async def test_after_a_repeated_ids_old_answer_a_refusal_still_carries_the_games_version(api: Any) -> None:
    game_id, tokens = await new_game(api.url, ["Ada", "Ben"])
    async with await GameClient.connect(api.url, game_id, tokens[1], reconnect=False) as ben:
        expect_accepted(await ben.place(PERF, "viola", id="b-1"))
        async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as ada:
            expect_accepted(await ada.place(STRINGS, "cello"))
        await ben.wait_for_version(3)
        again = expect_accepted(await ben.place(PERF, "viola", id="b-1"))
        assert again["version"] == 2  # the first answer, which is older than the game
        await ben.send_raw("{not json")
        late = await ben.next_frame()
        while late["type"] != "rejected":
            late = await ben.next_frame()
        assert (late["code"], late["version"]) == ("bad_request", 3)


# Section 1: ?trailer= ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "0", "TRUE", "True", "yes", "", " true", "true "])
async def test_trailer_takes_only_true_or_false(api: Any, value: str) -> None:
    game_id, _ = await new_game(api.url, ["Ada"])
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
        answer = await http.get(f"/games/{game_id}/events", params={"trailer": value})
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"code": "bad_request", "message": "trailer must be true or false"}


async def test_trailer_true_ends_with_the_trailer_and_false_without(api: Any) -> None:
    game_id, _ = await new_game(api.url, ["Ada"])
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as http:
        with_trailer = (await http.get(f"/games/{game_id}/events", params={"trailer": "true"})).text
        without = (await http.get(f"/games/{game_id}/events", params={"trailer": "false"})).text
    lines = [json.loads(line) for line in with_trailer.splitlines()]
    assert [line.get("type") for line in lines] == [None, "trailer"]
    assert [json.loads(line) for line in without.splitlines()] == lines[:1]


# Section 1: the creation limit counts creations ---------------------------------------------------------

BAD_BODIES: list[Any] = [
    {"players": []},
    {"players": ["A", "B", "C", "D", "E"]},
    {"players": ["Ada", "ada"]},
    {"players": ["A\u202eda"]},
    {"players": ["Ada"], "layout": "moon"},
    {"players": ["Ada"], "colour": "red"},
    [],
]


async def test_refused_bodies_do_not_use_up_an_addresss_creations(
    start_server: Any, own_redis: RedisProcess
) -> None:
    # A Redis of its own: the shared buckets live there. One creation a minute: nothing refills meanwhile.
    server = start_server(own_redis.url, create_rate_per_minute=1, create_burst=3)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        for index in range(21):
            bad = await http.post("/games", json=BAD_BODIES[index % len(BAD_BODIES)])
            assert (bad.status_code, bad.json()["code"]) == (400, "bad_request"), bad.text
            large = await http.post("/games", content=b"x" * (MAX_FRAME + 1))
            assert (large.status_code, large.json()["code"]) == (413, "too_large"), large.text
        for _ in range(3):
            assert (await http.post("/games", json={"players": ["Ada"]})).status_code == 201
        over = await http.post("/games", json={"players": ["Ada"]})
        assert (over.status_code, over.json()["code"]) == (429, "rate_limited"), over.text
        # Past the rate, a body is still checked first: what is wrong with it is the answer.
        large = await http.post("/games", content=b"x" * (MAX_FRAME + 1))
        assert (large.status_code, large.json()["code"]) == (413, "too_large"), large.text
        bad = await http.post("/games", json={"players": []})
        assert (bad.status_code, bad.json()["code"]) == (400, "bad_request"), bad.text
        assert len((await http.get("/games")).json()) == 3
        metrics = (await http.get("/metrics")).text
    assert 'orchestra_creations_refused_total{code="rate_limited"} 1.0' in metrics
