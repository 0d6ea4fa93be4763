"""The HTTP routes of protocol.md: creating games, views, events, health, schema, metrics, access."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jsonschema
import pytest

from orchestra_client import ConnectionRefused, GameClient, get_events
from tests.support.e2e import PERF, STRINGS, expect_accepted, new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


@pytest.fixture(scope="module")
def api(start_module_server: Any) -> Any:
    """One server with the default settings for the whole module."""
    return start_module_server()


@pytest.fixture
async def http(api: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as client:
        yield client


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message"}
    assert body["code"] == code and isinstance(body["message"], str) and body["message"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"players": []}, id="no-players"),
        pytest.param({"players": ["A", "B", "C", "D", "E"]}, id="five-players"),
        pytest.param({"players": [""]}, id="an-empty-name"),
        pytest.param({"players": ["x" * 33]}, id="a-33-character-name"),
        pytest.param({"players": ["Ada", "ADA"]}, id="two-names-equal-ignoring-case"),
        pytest.param({"players": ["A\u202eda"]}, id="a-bidi-override-in-a-name"),
        pytest.param({"players": ["Ada"], "layout": "moon"}, id="an-unknown-layout"),
        pytest.param({"players": ["Ada"], "colour": "red"}, id="an-unknown-field"),
        pytest.param({"players": ["Ada"], "spectators": "nobody"}, id="unknown-spectators"),
        pytest.param({"players": "Ada"}, id="players-not-a-list"),
        pytest.param({"players": [7]}, id="a-name-that-is-a-number"),
        pytest.param({}, id="no-players-field"),
        pytest.param([], id="not-an-object"),
    ],
)
async def test_creating_a_game_with_a_bad_body_is_a_bad_request(http: httpx.AsyncClient, body: Any) -> None:
    before = (await http.get("/games")).json()
    assert_error(await http.post("/games", json=body), 400, "bad_request")
    assert (await http.get("/games")).json() == before


async def test_a_name_of_32_characters_and_four_players_are_accepted(http: httpx.AsyncClient) -> None:
    response = await http.post("/games", json={"players": ["x" * 32, "B", "C", "D"]})
    assert response.status_code == 201
    created = response.json()
    assert created["version"] == 1 and [s["seat"] for s in created["seats"]] == [0, 1, 2, 3]
    assert (await http.get(f"/games/{created['game_id']}")).json()["players"][0]["name"] == "x" * 32


async def test_invalid_json_is_a_bad_request(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/games", content=b'{"players": [', headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "bad_request")


async def test_a_body_over_16_kib_is_too_large(http: httpx.AsyncClient) -> None:
    body = json.dumps({"players": ["Ada"], "layout": "x" * 17_000}).encode()
    assert_error(await http.post("/games", content=body), 413, "too_large")


async def test_a_streamed_body_over_16_kib_without_a_length_is_too_large(http: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"players": ["Ada"], "layout": "'
        for _ in range(20):
            yield b"x" * 1024
        yield b'"}'

    assert_error(await http.post("/games", content=chunks()), 413, "too_large")


async def test_an_unknown_game_is_404_unknown_game(http: httpx.AsyncClient) -> None:
    assert_error(await http.get("/games/no-such-game"), 404, "unknown_game")
    assert_error(await http.get("/games/no-such-game/events"), 404, "unknown_game")
    assert_error(await http.get("/games/no-such-game", params={"at": "1"}), 404, "unknown_game")


@pytest.mark.parametrize(
    "at",
    [
        "abc",
        "0",
        "3",
        "-1",
        "1.5",
        "",
        " 1",
        "2 ",
        "+1",
        "1_0",
        "\u0661",
        "\uff12",
        "\u00b2",
        "99999999999999999999",
    ],
)
async def test_at_outside_one_to_the_version_is_a_bad_request(
    http: httpx.AsyncClient, api: Any, at: str
) -> None:
    game_id, tokens = await new_game(api.url, ["Ada"])
    async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as ada:
        assert (await ada.place(PERF, "viola"))["version"] == 2
    assert_error(await http.get(f"/games/{game_id}", params={"at": at}), 400, "bad_request")


async def test_at_n_is_the_view_clients_saw_at_version_n(http: httpx.AsyncClient, api: Any) -> None:
    game_id, tokens = await new_game(api.url, ["Ada", "Ben"])
    watcher = await GameClient.connect(api.url, game_id, reconnect=False)
    seen = {1: watcher.view}
    async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as ada:
        moves = [
            (PERF, "viola"),
            (STRINGS, "viola"),
            (PERF, "viola"),
            ({"kind": "instrument", "instrument": "viola"}, "viola"),
        ]
        for token, space in moves:
            answer = await ada.place(token, space)
            await watcher.wait_for_version(answer["version"])
            seen[answer["version"]] = watcher.view
        await ada.end_game()
        await watcher.wait_for_version(len(moves) + 2)
        seen[len(moves) + 2] = watcher.view
    await watcher.close()
    for version, view in seen.items():
        response = await http.get(f"/games/{game_id}", params={"at": str(version)})
        assert response.status_code == 200
        assert response.json() == view
        assert view is not None and view["version"] == version
    # Without `at`, the view now and, beside its fields, who is at the table now (nobody is connected).
    now = (await http.get(f"/games/{game_id}")).json()
    offline = [{"seat": 0, "online": False}, {"seat": 1, "online": False}]
    assert now.pop("presence") == {"seats": offline, "spectators": 0}
    assert now == seen[len(moves) + 2]


async def test_events_are_ndjson_in_order_and_after_n_skips_the_first_n(
    http: httpx.AsyncClient, api: Any
) -> None:
    game_id, tokens = await new_game(api.url, ["Ada"])
    async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as ada:
        for space in ("viola", "clarinet", "timpani"):
            await ada.place(PERF, space)
    response = await http.get(f"/games/{game_id}/events")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.content.endswith(b"\n")
    lines = [json.loads(line) for line in response.content.splitlines()]
    assert [e["version"] for e in lines] == [1, 2, 3, 4]
    assert lines[0]["event"]["type"] == "GameCreated" and lines[0]["prev"] == "0" * 64
    after = await http.get(f"/games/{game_id}/events", params={"after": "2"})
    assert [json.loads(line) for line in after.content.splitlines()] == lines[2:]
    assert (await http.get(f"/games/{game_id}/events", params={"after": "4"})).content == b""
    assert_error(await http.get(f"/games/{game_id}/events", params={"after": "x"}), 400, "bad_request")


async def test_healthz_and_readyz_answer_200_with_a_live_redis(http: httpx.AsyncClient) -> None:
    health = await http.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "store": True, "tailer": True}


async def test_the_schema_lists_every_message_and_real_frames_validate(
    http: httpx.AsyncClient, api: Any
) -> None:
    response = await http.get("/schema.json")
    assert response.status_code == 200
    document = response.json()
    defs = document["$defs"]
    assert response.headers["content-type"] == "application/schema+json"
    wanted = {
        "ClientFrame",
        "ServerFrame",
        "Envelope",
        "View",
        "ViewDelta",
        "Hello",
        "PlaceFrame",
        "EndGameFrame",
        "Welcome",
        "Accepted",
        "RejectedFrame",
        "EventsFrame",
        "DeltaFrame",
        "HistoryFrame",
    }
    events = {"Event", "GameCreated", "ChairClaimed", "ChairStolen", "PlacedBelowLine", "GameEnded"}
    assert wanted | events <= set(defs)
    jsonschema.Draft202012Validator.check_schema(document)

    def validator(name: str) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": defs})

    server_frame = validator("ServerFrame")
    envelope = validator("Envelope")
    view = validator("View")
    client_frame = validator("ClientFrame")
    game_id, tokens = await new_game(api.url, ["Ada", "Ben"])
    async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as ada:
        accepted = await ada.place(
            {"kind": "instrument", "instrument": "rare_strings"}, "rare_strings", materials=["wood"]
        )
        rejected = await ada.place(STRINGS, "oboe")
        ended = await ada.end_game()
        welcome = ada.welcome
    live = []
    for mode in ("full", None, False):  # one live frame of each kind (None: the default, deltas)
        game_id, tokens = await new_game(api.url, ["Ada"])
        async with await GameClient.connect(api.url, game_id, view=mode, reconnect=False) as watcher:
            async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as cy:
                await cy.place({"kind": "instrument", "instrument": "rare_winds"}, "rare_winds")
            live.append(await watcher.next_frame())
    assert [{"view", "view_delta"} & set(frame) for frame in live] == [{"view"}, {"view_delta"}, set()]
    assert live[1]["view_delta"]["score_changes"] == [
        {
            "seat": 0,
            "prestige": 3,
            "resources": live[0]["view"]["scores"][0]["resources"],
            "held": {"rare_winds": 1},
        }
    ]
    for frame in (welcome, accepted, rejected, ended, *live):
        server_frame.validate(frame)
    delta = live[1]["view_delta"]
    for broken in (
        {**delta, "added": {"viola": {"kind": "rare"}}},
        {**delta, "score_changes": [{"seat": 0, "chairs": ["rare_winds"]}]},
        {**delta, "scores": delta["score_changes"], "score_changes": None},
    ):
        with pytest.raises(jsonschema.ValidationError):
            server_frame.validate({**live[1], "view_delta": broken})
    with pytest.raises(jsonschema.ValidationError):
        client_frame.validate({"type": "hello", "view": "patch"})
    client_frame.validate({"type": "hello", "view": True})
    assert "ViewPatch" not in document["$defs"] and {"ViewDelta", "ScoreChange"} <= set(document["$defs"])
    view.validate(welcome["view"])
    for item in await get_events(api.url, game_id):
        envelope.validate(item)
    client_frame.validate({"type": "place", "id": "c-1", "token": PERF, "space": "viola", "skill": 3})
    with pytest.raises(jsonschema.ValidationError):
        envelope.validate({"game_id": game_id, "version": "two"})
    with pytest.raises(jsonschema.ValidationError):
        client_frame.validate({"type": "place", "id": "c-1", "token": {"kind": "spell"}, "space": "viola"})


def counter(metrics: str, outcome: str, code: str) -> float:
    pattern = (
        rf'^orchestra_commands_total\{{(?=[^}}]*code="{code}")(?=[^}}]*outcome="{outcome}")[^}}]*\}} (\S+)$'
    )
    found = re.search(pattern, metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_metrics_count_commands_by_outcome_and_code(http: httpx.AsyncClient, api: Any) -> None:
    before = (await http.get("/metrics")).text
    game_id, tokens = await new_game(api.url, ["Ada"])
    async with await GameClient.connect(api.url, game_id, tokens[0], reconnect=False) as ada:
        for space in ("viola", "clarinet", "timpani"):
            expect_accepted(await ada.place(PERF, space))
        assert (await ada.place(STRINGS, "oboe"))["code"] == "illegal_space"
    response = await http.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    after = response.text
    assert "orchestra_commands" in after
    assert counter(after, "accepted", "") - counter(before, "accepted", "") >= 3
    assert counter(after, "rejected", "illegal_space") - counter(before, "rejected", "illegal_space") >= 1


async def test_a_private_game_is_read_only_with_its_watch_token_or_a_seat_token(
    http: httpx.AsyncClient, api: Any
) -> None:
    created = (await http.post("/games", json={"players": ["Ada", "Ben"], "spectators": "token"})).json()
    game_id, watch = created["game_id"], created["watch_token"]
    seat = created["seats"][1]["token"]
    for path in (f"/games/{game_id}", f"/games/{game_id}/events"):
        assert_error(await http.get(path), 403, "forbidden")
        assert_error(await http.get(path, headers={"authorization": "Bearer wrong"}), 403, "forbidden")
        assert_error(await http.get(path, params={"token": watch}), 403, "forbidden")  # never in a URL
        for token in (watch, seat):
            assert (await http.get(path, headers={"authorization": f"Bearer {token}"})).status_code == 200
    assert game_id not in {g["game_id"] for g in (await http.get("/games")).json()}


async def test_a_private_game_refuses_a_spectator_without_its_watch_token(
    http: httpx.AsyncClient, api: Any
) -> None:
    created = (await http.post("/games", json={"players": ["Ada"], "spectators": "token"})).json()
    game_id = created["game_id"]
    with pytest.raises(ConnectionRefused) as refused:
        await GameClient.connect(api.url, game_id, reconnect=False)
    assert refused.value.code == 1008
    assert refused.value.frame is not None and refused.value.frame["code"] == "forbidden"
    async with await GameClient.connect(api.url, game_id, created["watch_token"], reconnect=False) as watcher:
        assert watcher.welcome["role"] == "spectator" and watcher.welcome["seat"] is None
        answer = await watcher.place(PERF, "viola")
        assert answer["code"] == "forbidden"


API_KEY = "k3y-9f8e7d6c5b4a3210"


@pytest.fixture(scope="module")
def keyed(start_module_server: Any) -> Any:
    """A server that needs an API key to create games."""
    return start_module_server(api_key=API_KEY)


async def test_creating_a_game_needs_the_api_key_when_one_is_set(keyed: Any) -> None:
    async with httpx.AsyncClient(base_url=keyed.url, timeout=10) as http:
        body = {"players": ["Ada"]}
        assert_error(await http.post("/games", json=body), 401, "forbidden")
        assert_error(
            await http.post("/games", json=body, headers={"authorization": "Bearer wrong"}), 401, "forbidden"
        )
        assert_error(
            await http.post("/games", json=body, headers={"authorization": API_KEY}), 401, "forbidden"
        )
        created = await http.post("/games", json=body, headers={"authorization": f"Bearer {API_KEY}"})
        assert created.status_code == 201
        # Reading a public game needs no key.
        assert (await http.get(f"/games/{created.json()['game_id']}")).status_code == 200
