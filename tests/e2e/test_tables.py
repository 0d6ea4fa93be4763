"""Open seats, open tables, the host and play again (issue 40) on real servers over a real Redis.

Each rule and each refusal end to end: the real `orchestra serve` (two nodes on one Redis where a node's
news must reach the other), real websocket clients (orchestra_client), and the CLI's verify, archive and
import on the games these commands write.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from orchestra_client import (
    ConnectionRefused,
    GameClient,
    create_game,
    get_events,
    get_view,
    join_game,
    next_game,
    open_tables,
    reissue_token,
)
from server.protocol import schema
from tests.e2e.test_archive_import import cli, key_options, stored
from tests.support.e2e import PERF, expect_accepted
from tests.support.servers import ServerProcess
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

DEFS = json.loads(schema.document())["$defs"]


def validate(name: str, document: Any) -> None:
    jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": DEFS}).validate(document)


async def post(url: str, path: str, token: str | None = None, body: Any = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        return await http.post(path, json=body, headers=headers)


async def refused(url: str, game_id: str, token: str | None) -> ConnectionRefused:
    with pytest.raises(ConnectionRefused) as caught:
        await GameClient.connect(url, game_id, token, reconnect=False)
    return caught.value


async def closed_with(client: GameClient, timeout: float = 10) -> tuple[int | None, str]:
    found = await until(lambda: client.closed_with, timeout, "the connection closed")
    assert found is not None
    return found


# 1. Open seats ----------------------------------------------------------------------------------------


async def test_open_seats_are_taken_by_name_and_placements_wait_for_a_full_table(
    server: ServerProcess,
) -> None:
    created = await create_game(server.url, ["Ada", None, None])
    assert [seat["name"] for seat in created["seats"]] == ["Ada", None, None]
    assert all(seat["token"] for seat in created["seats"]) and created["host_token"]
    game_id, (ada_token, ben_token, cy_token) = created["game_id"], [s["token"] for s in created["seats"]]
    view = await get_view(server.url, game_id)
    validate("View", view)
    assert view["players"] == [
        {"seat": 0, "name": "Ada"},
        {"seat": 1, "name": None},
        {"seat": 2, "name": None},
    ]
    async with await GameClient.connect(server.url, game_id, ada_token, reconnect=False) as ada:
        async with await GameClient.connect(server.url, game_id, ben_token, reconnect=False) as ben:
            early = await ada.place(PERF, "viola")
            assert early["code"] == "table_not_full" and "1, 2 still open" in early["message"]
            assert (await ada.end_game())["code"] == "table_not_full"
            assert (await ada.take_seat("Zed"))["code"] == "seat_taken"
            assert (await ben.take_seat("ADA"))["code"] == "bad_request"  # Ada's name, ignoring case
            assert (await ben.take_seat("Be\u200bn"))["code"] == "bad_request"
            taken = expect_accepted(await ben.take_seat("  Ben "))
            [envelope] = taken["events"]
            assert envelope["event"] == {"type": "SeatTaken", "seat": 1, "name": "Ben"}
            assert (await ben.take_seat("Bob"))["code"] == "seat_taken"
            # Ada's view follows through the delta frame.
            await ada.wait_for_version(taken["version"])
            assert ada.view is not None and ada.view["players"][1] == {"seat": 1, "name": "Ben"}
            assert (await ada.place(PERF, "viola"))["code"] == "table_not_full"
            answer = await post(server.url, f"/games/{game_id}/seats/2/close", created["host_token"])
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"seat": 2, "version": 3}
            expect_accepted(await ada.place(PERF, "viola"))
            expect_accepted(await ben.place(PERF, "clarinet"))
            ended = expect_accepted(await ada.end_game())
    # The closed seat took no part: out of the ranking, its token plays no more.
    ranking = ended["events"][0]["event"]["ranking"]
    assert sorted(rank["seat"] for rank in ranking) == [0, 1]
    async with await GameClient.connect(server.url, game_id, cy_token, reconnect=False) as cy:
        assert (await cy.take_seat("Cy"))["code"] == "seat_closed"
    final = await get_view(server.url, game_id)
    assert final["players"][2] == {"seat": 2, "name": None, "closed": True}


async def test_a_closed_seats_connection_is_closed_and_its_take_seat_refused(server: ServerProcess) -> None:
    created = await create_game(server.url, ["Ada", None])
    game_id, host = created["game_id"], created["host_token"]
    seat_token = created["seats"][1]["token"]
    async with await GameClient.connect(server.url, game_id, seat_token, reconnect=False) as open_seat:
        assert (await post(server.url, f"/games/{game_id}/seats/1/close", host)).status_code == 200
        code, reason = await closed_with(open_seat)
        assert code == 4004 and "closed seat 1" in reason


# 3. The host ------------------------------------------------------------------------------------------


async def test_host_routes_refuse_a_missing_or_wrong_host_token_and_change_nothing(
    server: ServerProcess,
) -> None:
    created = await create_game(server.url, ["Ada", None])
    other = await create_game(server.url, ["Cy"])
    game_id = created["game_id"]
    wrong = [None, other["host_token"], created["seats"][0]["token"], "not-a-token"]
    for token in wrong:
        for path in ("/seats/1/token", "/seats/1/close", "/next"):
            answer = await post(server.url, f"/games/{game_id}{path}", token)
            assert answer.status_code == 403, (token, path, answer.text)
            assert answer.json()["code"] == "forbidden"
    assert len(await get_events(server.url, game_id)) == 1
    unknown = await post(server.url, "/games/nosuchgame/seats/0/close", created["host_token"])
    assert unknown.status_code == 404
    bad_seat = await post(server.url, f"/games/{game_id}/seats/9/close", created["host_token"])
    assert bad_seat.status_code == 400
    out_of_game = await post(server.url, f"/games/{game_id}/seats/3/token", created["host_token"])
    assert out_of_game.status_code == 400 and "seats 0 to 1" in out_of_game.json()["message"]


async def test_close_is_seat_taken_for_a_named_seat_and_game_started_after_a_placement(
    server: ServerProcess,
) -> None:
    created = await create_game(server.url, ["Ada", None, None])
    game_id, host = created["game_id"], created["host_token"]
    named = await post(server.url, f"/games/{game_id}/seats/0/close", host)
    assert (named.status_code, named.json()["code"]) == (409, "seat_taken")
    assert (await post(server.url, f"/games/{game_id}/seats/2/close", host)).status_code == 200
    again = await post(server.url, f"/games/{game_id}/seats/2/close", host)
    assert (again.status_code, again.json()["code"]) == (409, "seat_closed")
    async with await GameClient.connect(server.url, game_id, created["seats"][1]["token"]) as ben:
        expect_accepted(await ben.take_seat("Ben"))
        expect_accepted(await ben.place(PERF, "viola"))
    started = await post(server.url, f"/games/{game_id}/seats/1/close", host)
    assert (started.status_code, started.json()["code"]) == (409, "game_started")


async def test_a_reissued_token_stops_at_once_on_every_node_and_the_new_one_plays(
    start_server: Callable[..., ServerProcess],
) -> None:
    first, second = start_server(), start_server()
    created = await create_game(first.url, ["Ada", "Ben"])
    game_id, host = created["game_id"], created["host_token"]
    old = created["seats"][1]["token"]
    # Ben on the second node, which holds the game (and its credentials) before the reissue.
    ben = await GameClient.connect(second.url, game_id, old, reconnect=False)
    watcher = await GameClient.connect(second.url, game_id, reconnect=False)
    new = await reissue_token(first.url, game_id, 1, host)
    assert new != old
    code, reason = await closed_with(ben)
    assert code == 4003 and "new token" in reason
    assert watcher.closed_with is None  # only the seat's connections
    for node in (first, second):
        assert (await refused(node.url, game_id, old)).code == 1008
    async with await GameClient.connect(second.url, game_id, new, reconnect=False) as again:
        assert again.seat == 1
        async with await GameClient.connect(first.url, game_id, created["seats"][0]["token"]) as ada:
            expect_accepted(await ada.place(PERF, "viola"))
        expect_accepted(await again.place(PERF, "clarinet"))
    event = (await get_events(first.url, game_id))[1]["event"]
    assert event["type"] == "SeatTokenReissued" and event["seat"] == 1 and len(event["credential"]) == 64
    assert new not in json.dumps(await get_events(first.url, game_id))
    await watcher.close()


# 2. Open tables ---------------------------------------------------------------------------------------


async def test_an_open_table_is_listed_and_joined_seat_by_seat_until_none_is_left(
    server: ServerProcess,
) -> None:
    created = await create_game(server.url, ["Ada", None, None], open=True)
    game_id = created["game_id"]
    listed = [t for t in await open_tables(server.url) if t["game_id"] == game_id]
    assert listed == [
        {"game_id": game_id, "players": ["Ada", None, None], "open_seats": [1, 2], "version": 1}
    ]
    bad = await post(server.url, f"/games/{game_id}/join", body={"name": "ada"})
    assert (bad.status_code, bad.json()["code"]) == (400, "bad_request")
    ben = await join_game(server.url, game_id, "Ben")
    assert ben["seat"] == 1
    # The seat's first token (the creator's link) plays it no more: the joiner's does.
    assert (await refused(server.url, game_id, created["seats"][1]["token"])).code == 1008
    async with await GameClient.connect(server.url, game_id, ben["token"], reconnect=False) as client:
        assert client.seat == 1
        assert (await client.take_seat("Bob"))["code"] == "seat_taken"
    cy = await join_game(server.url, game_id, "Cy")
    assert cy["seat"] == 2
    assert game_id not in [t["game_id"] for t in await open_tables(server.url)]
    full = await post(server.url, f"/games/{game_id}/join", body={"name": "Di"})
    assert (full.status_code, full.json()["code"]) == (409, "no_open_seat")
    view = await get_view(server.url, game_id)
    assert [p["name"] for p in view["players"]] == ["Ada", "Ben", "Cy"]


async def test_a_join_to_a_game_that_is_not_open_is_forbidden(server: ServerProcess) -> None:
    created = await create_game(server.url, ["Ada", None])
    answer = await post(server.url, f"/games/{created['game_id']}/join", body={"name": "Ben"})
    assert (answer.status_code, answer.json()["code"]) == (403, "forbidden")
    assert len(await get_events(server.url, created["game_id"])) == 1
    unknown = await post(server.url, "/games/nosuchgame/join", body={"name": "Ben"})
    assert unknown.status_code == 404
    private = await post(
        server.url, "/games", body={"players": ["Ada", None], "open": True, "spectators": "token"}
    )
    assert (private.status_code, private.json()["code"]) == (400, "bad_request")


async def test_a_flood_of_joins_hits_the_creation_limit(start_server: Callable[..., ServerProcess]) -> None:
    node = start_server(create_rate_per_minute=60, create_burst=3)
    created = await create_game(node.url, ["Ada", None, None, None], open=True)  # spends one
    game_id = created["game_id"]
    answers = [await post(node.url, f"/games/{game_id}/join", body={"name": f"P{i}"}) for i in range(4)]
    statuses = [answer.status_code for answer in answers]
    assert statuses == [201, 201, 429, 429], statuses
    assert answers[2].json()["code"] == "rate_limited" and int(answers[2].headers["retry-after"]) >= 1
    view = await get_view(node.url, game_id)
    assert [p["name"] for p in view["players"]] == ["Ada", "P0", "P1", None]


# 4. Play again ----------------------------------------------------------------------------------------


async def test_play_again_before_the_end_is_refused(server: ServerProcess) -> None:
    created = await create_game(server.url, ["Ada"])
    async with await GameClient.connect(server.url, created["game_id"], created["seats"][0]["token"]) as ada:
        assert (await ada.play_again())["code"] == "game_not_over"
    answer = await post(server.url, f"/games/{created['game_id']}/next", created["host_token"])
    assert (answer.status_code, answer.json()["code"]) == (409, "game_not_over")


async def test_play_again_from_two_nodes_at_once_starts_one_next_game_that_every_client_follows(
    start_server: Callable[..., ServerProcess],
) -> None:
    first, second = start_server(), start_server()
    created = await create_game(first.url, ["Ada", None, None], spectators="token", open=False)
    game_id, host = created["game_id"], created["host_token"]
    ada_t, ben_t, cy_t = (seat["token"] for seat in created["seats"])
    watch = created["watch_token"]
    assert (await post(first.url, f"/games/{game_id}/seats/2/close", host)).status_code == 200
    ada = await GameClient.connect(first.url, game_id, ada_t, reconnect=False)
    ben = await GameClient.connect(second.url, game_id, ben_t, reconnect=False)
    watcher = await GameClient.connect(second.url, game_id, watch, reconnect=False)
    hosting = await GameClient.connect(first.url, game_id, host, reconnect=False)  # the host watches
    taken = expect_accepted(await ben.take_seat("Ben"))
    await ada.wait_for_version(taken["version"])  # the other node's news
    expect_accepted(await ada.place(PERF, "viola"))
    expect_accepted(await ada.end_game())
    await ben.wait_for_version(5)
    # Both at once: a seat on the second node, the host on the first.
    by_ben, by_host = await asyncio.gather(
        ben.play_again(id="again-1"), post(first.url, f"/games/{game_id}/next", host)
    )
    expect_accepted(by_ben)
    assert by_host.status_code in (200, 201)
    next_id = by_host.json()["game_id"]
    assert by_ben["events"][0]["event"] == {"type": "NextGame", "game_id": next_id}
    later = await post(second.url, f"/games/{game_id}/next", host)
    assert (later.status_code, later.json()) == (200, {"game_id": next_id})
    assert expect_accepted(await ada.play_again())["events"] == by_ben["events"]
    # Every connection is told, with the token that does the same there (tokens carry over).
    for client, token in ((ada, ada_t), (ben, ben_t), (watcher, watch), (hosting, host)):
        told = await client.wait_for_next_game()
        assert told == {"game_id": next_id, "token": token}
        validate("ServerFrame", {"type": "next_game", **told})
    # A late comer to the ended game is told too, after its welcome.
    async with await GameClient.connect(second.url, game_id, ben_t, reconnect=False) as late:
        assert (await late.wait_for_next_game()) == {"game_id": next_id, "token": ben_t}
    async with httpx.AsyncClient(base_url=second.url, timeout=10) as http:
        answer = await http.get(f"/games/{game_id}", headers={"authorization": f"Bearer {watch}"})
    ended = answer.json()
    assert ended["next_game"] == next_id
    validate("Game", ended)
    # The next game: the same seats (the closed one closed), names, layout and spectators.
    nxt = await get_view(first.url, next_id, token=host)
    assert nxt["players"] == [
        {"seat": 0, "name": "Ada"},
        {"seat": 1, "name": "Ben"},
        {"seat": 2, "name": None, "closed": True},
    ]
    assert nxt["spaces"].keys() == ended["spaces"].keys() and nxt["version"] == 1
    assert (await refused(first.url, next_id, None)).code == 1008  # still private
    async with await GameClient.connect(second.url, next_id, ben_t, reconnect=False) as ben2:
        assert ben2.seat == 1
        async with await GameClient.connect(first.url, next_id, ada_t, reconnect=False) as ada2:
            expect_accepted(await ada2.place(PERF, "viola"))
        expect_accepted(await ben2.place(PERF, "clarinet"))
    async with await GameClient.connect(first.url, next_id, cy_t, reconnect=False) as cy:
        assert (await cy.place(PERF, "timpani"))["code"] == "seat_closed"  # closed there too
    for client in (ada, ben, watcher, hosting):
        await client.close()


async def test_a_game_with_every_new_event_verifies_archives_and_imports(
    server: ServerProcess, redis_url: str, tmp_path: Path
) -> None:
    created = await create_game(server.url, ["Ada", None, None], open=True)
    game_id, host = created["game_id"], created["host_token"]
    joined = await join_game(server.url, game_id, "Ben")
    assert (await post(server.url, f"/games/{game_id}/seats/2/close", host)).status_code == 200
    new_ada = await reissue_token(server.url, game_id, 0, host)
    async with await GameClient.connect(server.url, game_id, new_ada) as ada:
        async with await GameClient.connect(server.url, game_id, joined["token"]) as ben:
            expect_accepted(await ada.place(PERF, "viola"))
            expect_accepted(await ben.place(PERF, "clarinet"))
            expect_accepted(await ada.end_game())
    next_id = await next_game(server.url, game_id, host)
    types = [e["event"]["type"] for e in await get_events(server.url, game_id)]
    assert types == [
        "GameCreated",
        "SeatTaken",
        "SeatTokenReissued",
        "SeatClosed",
        "SeatTokenReissued",
        "ChairClaimed",
        "ChairClaimed",
        "GameEnded",
        "NextGame",
    ]
    verified = await cli("verify", game_id, "--server", server.url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    before = stored(redis_url, game_id)
    out = tmp_path / "game.ndjson"
    archived = await cli("archive", game_id, "--out", str(out), *key_options(server, redis_url))
    assert archived.returncode == 0, archived.stdout + archived.stderr
    imported = await cli("import", str(out), *key_options(server, redis_url))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert stored(redis_url, game_id) == before
    # The reissued token, not the first, is still the seat's after the round trip.
    assert (await refused(server.url, game_id, created["seats"][0]["token"])).code == 1008
    async with await GameClient.connect(server.url, game_id, new_ada, reconnect=False) as ada:
        assert ada.seat == 0
    assert (await get_view(server.url, next_id))["version"] == 1


async def test_an_open_table_archived_and_imported_is_an_open_table_again(
    server: ServerProcess, redis_url: str, tmp_path: Path
) -> None:
    created = await create_game(server.url, ["Ada", None], open=True)
    game_id = created["game_id"]
    out = tmp_path / "open.ndjson"
    options = key_options(server, redis_url)
    archived = await cli("archive", game_id, "--force", "--out", str(out), *options)
    assert archived.returncode == 0, archived.stdout + archived.stderr
    assert game_id not in [t["game_id"] for t in await open_tables(server.url)]
    imported = await cli("import", str(out), *options)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert game_id in [t["game_id"] for t in await open_tables(server.url)]
    assert (await join_game(server.url, game_id, "Ben"))["seat"] == 1
