"""The records' routes on a real server reading the records database the projector wrote."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest

from projections.records import players, standings
from server.records.database import GameQuery, sqlite_records
from tests.records.play import Played, play_game
from tests.records.test_projector import project
from tests.support.redis import RedisProcess, free_port
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.integration


async def records_server(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess], count: int = 10
) -> tuple[ServerProcess, list[Played]]:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(1943)
    played = [await play_game(server.url, rng) for _ in range(count)]
    path = server.directory / "var" / "records.sqlite3"
    await project(own_redis.url, lambda: sqlite_records(path))
    return server, played


def get(server: ServerProcess, path: str, **params: object) -> httpx.Response:
    return httpx.get(server.url + path, params={k: str(v) for k, v in params.items()}, timeout=10)


async def test_games_are_paged_newest_first_each_public_game_once(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess]
) -> None:
    server, played = await records_server(own_redis, start_server)
    seen: list[dict[str, Any]] = []
    params: dict[str, object] = {"limit": 3}
    while True:
        page = get(server, "/records/games", **params).json()
        seen += page["games"]
        if page["next"] is None:
            break
        params["after"] = page["next"]
    assert [g["game_id"] for g in seen] == [
        g.game_id for g in reversed(played) if g.token is None
    ]  # played one after another: newest first is the reverse
    assert all(g["replay"] == f"/games/{g['game_id']}/replay" for g in seen)
    assert {len(g["players"]) for g in seen} <= {1, 2, 3, 4}


async def test_filters_by_player_as_the_name_rules_compare_and_by_dates_and_layout(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess]
) -> None:
    server, played = await records_server(own_redis, start_server)
    every = get(server, "/records/games", limit=200).json()["games"]
    with_ada = [g["game_id"] for g in every if any(p["name"] == "Ada" for p in g["players"])]
    assert with_ada and get(server, "/records/games", player="ＡＤＡ").json()["games"] == [
        g for g in every if g["game_id"] in with_ada
    ]
    middle = every[len(every) // 2]["ended_at"]
    later = get(server, "/records/games", since=middle, limit=200).json()["games"]
    earlier = get(server, "/records/games", until=middle, limit=200).json()["games"]
    assert later + earlier == every and later[-1]["ended_at"] == middle
    assert get(server, "/records/games", layout="standard", limit=200).json()["games"] == every
    assert get(server, "/records/games", layout="other").json() == {"games": [], "next": None}
    assert get(server, "/records/games", since="2999-01-01").json()["games"] == []


async def test_a_private_game_is_shown_only_to_its_watch_token(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess]
) -> None:
    server, played = await records_server(own_redis, start_server)
    private = next(p for p in played if p.token is not None)
    listed = {g["game_id"] for g in get(server, "/records/games", limit=200).json()["games"]}
    assert private.game_id not in listed
    assert get(server, "/records/games", game=private.game_id).status_code == 403
    shown = httpx.get(
        server.url + "/records/games",
        params={"game": private.game_id, "limit": "200"},
        headers={"authorization": f"Bearer {private.token}"},
    ).json()["games"]
    assert {g["game_id"] for g in shown} == listed | {private.game_id}


def with_tokens(server: ServerProcess, path: str, *values: str, **params: object) -> httpx.Response:
    """GET `path` with one Orchestra-Watch-Tokens header per value."""
    headers = [("orchestra-watch-tokens", value) for value in values]
    query = {k: str(v) for k, v in params.items()}
    return httpx.get(server.url + path, params=query, headers=headers, timeout=10)


async def test_private_games_are_shown_to_the_tokens_of_a_header_and_a_wrong_one_shows_nothing(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess]
) -> None:
    server, played = await records_server(own_redis, start_server, count=12)
    private = [p for p in played if p.token is not None]
    assert len(private) >= 2
    first, second = private[:2]
    assert first.token is not None and second.token is not None
    routes = ("/records/games", "/records/standings", "/records/players/Ada")
    before = {path: get(server, path).json() for path in routes}
    public = {g["game_id"] for g in before["/records/games"]["games"]}
    assert public == {p.game_id for p in played if p.token is None}

    # Two right tokens at once, in one header or in two: both games, in every answer.
    database = sqlite_records(server.directory / "var" / "records.sqlite3")
    try:
        results = database.games(GameQuery(limit=200, shown=(first.game_id, second.game_id)))
    finally:
        database.close()
    folded = players(results)
    both = (f"{first.game_id}={first.token}, {second.game_id}={second.token}",)
    apart = (f"{first.game_id}={first.token}", f"{second.game_id}={second.token}")
    for values in (both, apart):
        games = with_tokens(server, "/records/games", *values, limit=200).json()["games"]
        assert {g["game_id"] for g in games} == public | {first.game_id, second.game_id}
        table = with_tokens(server, "/records/standings", *values).json()["standings"]
        assert table == [{"place": n, **msgspec.to_builtins(r)} for n, r in standings(folded.values())]
        for key, record in folded.items():
            answer = with_tokens(server, f"/records/players/{key}", *values)
            assert answer.json() == msgspec.to_builtins(record)
    assert folded != players(r for r in results if not r.private), "the private games count"

    # A token of another game, a game that does not exist, one wrong pair beside a right one: the same
    # refusal on every route, which does not say whether the game exists, and nothing shown.
    wrong = f"{second.game_id}={first.token}"
    unknown = f"{'n' * len(second.game_id)}={first.token}"
    mixed = f"{first.game_id}={first.token},{second.game_id}={'x' * len(first.token)}"
    for path in routes:
        refusals = [with_tokens(server, path, value) for value in (wrong, unknown, mixed)]
        assert {(r.status_code, r.json()["code"]) for r in refusals} == {(403, "forbidden")}
        messages = {r.json()["message"].replace("n" * len(second.game_id), second.game_id) for r in refusals}
        assert len(messages) == 1, messages
        bad = with_tokens(server, path, f"{first.game_id}:{first.token}")
        assert (bad.status_code, bad.json()["code"]) == (400, "bad_request")
    many = ",".join(f"g{n}={first.token}" for n in range(51))
    assert with_tokens(server, "/records/games", many).json()["code"] == "bad_request"
    # The refusals changed nothing: the public answers are as before, the right tokens still open.
    assert {path: get(server, path).json() for path in routes} == before
    assert with_tokens(server, "/records/games", *both).json()["games"] == games


async def test_players_and_standings_answer_as_the_pure_folds(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess]
) -> None:
    server, played = await records_server(own_redis, start_server)
    database = sqlite_records(server.directory / "var" / "records.sqlite3")
    try:
        results = database.games(GameQuery(limit=200))  # private games are left out unless shown
    finally:
        database.close()
    folded = players(results)
    for key, record in folded.items():
        answer = get(server, f"/records/players/{key.upper()}")
        assert answer.status_code == 200 and answer.json() == msgspec.to_builtins(record)
    table = get(server, "/records/standings").json()["standings"]
    assert table == [{"place": place, **msgspec.to_builtins(r)} for place, r in standings(folded.values())]
    assert get(server, "/records/players/Nobody").json()["code"] == "unknown_player"


@pytest.mark.parametrize(
    ("path", "params", "code"),
    [
        ("/records/games", {"colour": "red"}, "unknown_parameter"),
        ("/records/games", {"since": "yesterday"}, "bad_date"),
        ("/records/games", {"until": "2026-13-01"}, "bad_date"),
        ("/records/games", {"limit": "201"}, "bad_limit"),
        ("/records/games", {"limit": "0"}, "bad_limit"),
        ("/records/games", {"limit": "1_0"}, "bad_limit"),
        ("/records/games", {"after": "nonsense"}, "bad_cursor"),
        ("/records/games", {"player": " "}, "bad_name"),
        ("/records/games", {"player": "a\u202eb"}, "bad_name"),
        ("/records/games", {"layout": "x" * 65}, "bad_request"),
        ("/records/players/" + "x" * 33, {}, "bad_name"),
        ("/records/players/Ada", {"since": "2026-01-01"}, "unknown_parameter"),
        ("/records/standings", {"since": "31/01/2026"}, "bad_date"),
        ("/records/standings", {"player": "Ada"}, "unknown_parameter"),
    ],
)
def test_bad_input_is_refused_with_its_code(
    server: ServerProcess, path: str, params: dict[str, str], code: str
) -> None:
    answer = get(server, path, **params)
    assert answer.status_code == 400 and answer.json()["code"] == code, answer.text


def test_the_limit_at_its_maximum_is_taken(server: ServerProcess) -> None:
    assert get(server, "/records/games", limit=200).json() == {"games": [], "next": None}


def test_a_records_database_that_cannot_be_reached_answers_unavailable_and_the_games_go_on(
    start_server: Callable[..., ServerProcess],
) -> None:
    closed = free_port()  # nothing listens there
    server = start_server(records_url=f"postgresql://postgres@127.0.0.1:{closed}/postgres")
    for path in ("/records/games", "/records/standings", "/records/players/Ada"):
        answer = get(server, path)
        assert answer.status_code == 503 and answer.json()["code"] == "unavailable", answer.text
    assert httpx.get(server.url + "/games", timeout=10).status_code == 200
