"""GET /games/{id}/legal: where a token may go, answered from the domain's rules on the game's layout."""

from __future__ import annotations

import json

import httpx
import msgspec
import pytest

import domain
from tests.support.browser import new_game
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.e2e


async def ask(
    url: str, game_id: str, token: object, bearer: str | None = None, **params: str
) -> httpx.Response:
    headers = {"authorization": f"Bearer {bearer}"} if bearer else {}
    query = {"token": token if isinstance(token, str) else json.dumps(token), **params}
    async with httpx.AsyncClient(base_url=url) as http:
        return await http.get(f"/games/{game_id}/legal", params=query, headers=headers)


async def test_it_answers_the_domains_legal_spaces_for_every_token(server: ServerProcess) -> None:
    game_id, _ = await new_game(server.url)
    tokens = [{"kind": "performance", "era": era} for era in ("baroque", "classical", "romantic")]
    tokens += [{"kind": "repair", "family": f} for f in ("strings", "winds", "percussion_keyboards")]
    tokens += [{"kind": "instrument", "instrument": i} for i in domain.STANDARD.instruments]
    for token in tokens:
        answer = await ask(server.url, game_id, token)
        assert answer.status_code == 200
        expected = list(domain.legal_spaces(domain.STANDARD, msgspec.convert(token, domain.Token)))
        materials = {"rare_strings": 1} if expected == ["rare_strings"] else {}
        assert answer.json() == {"spaces": expected, "materials": materials}, token


async def test_it_says_how_many_materials_rare_strings_needs_at_that_skill(server: ServerProcess) -> None:
    game_id, _ = await new_game(server.url)
    rare = {"kind": "instrument", "instrument": "rare_strings"}
    assert (await ask(server.url, game_id, rare)).json() == {
        "spaces": ["rare_strings"],
        "materials": {"rare_strings": 1},
    }
    doubled = (await ask(server.url, game_id, rare, skill="6")).json()
    assert doubled["materials"] == {"rare_strings": 2}
    # A performance is never doubled, and no other space asks for materials.
    performance = (
        await ask(server.url, game_id, {"kind": "performance", "era": "classical"}, skill="9")
    ).json()
    assert performance["materials"] == {}


@pytest.mark.parametrize(
    ("token", "params"),
    [
        ("not json", {}),
        ({"kind": "performance", "era": "modern"}, {}),
        ({"kind": "performance", "era": "classical", "seat": 0}, {}),
        ({"kind": "repair", "family": "strings"}, {"skill": "0"}),
        ({"kind": "repair", "family": "strings"}, {"skill": "11"}),
        ({"kind": "repair", "family": "strings"}, {"skill": "x"}),
    ],
)
async def test_a_bad_token_or_skill_is_a_bad_request(
    server: ServerProcess, token: object, params: dict[str, str]
) -> None:
    game_id, _ = await new_game(server.url)
    answer = await ask(server.url, game_id, token, **params)
    assert answer.status_code == 400 and answer.json()["code"] == "bad_request"


async def test_a_missing_token_an_unknown_game_and_a_private_game(server: ServerProcess) -> None:
    game_id, tokens = await new_game(server.url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        missing = await http.get(f"/games/{game_id}/legal")
        assert missing.status_code == 400 and missing.json()["code"] == "bad_request"
        created = (await http.post("/games", json={"players": ["Ada"], "spectators": "token"})).json()
    repair = {"kind": "repair", "family": "winds"}
    unknown = await ask(server.url, "nosuchgame", repair)
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_game"
    private = created["game_id"]
    assert (await ask(server.url, private, repair)).status_code == 403
    assert (
        await ask(server.url, private, repair, bearer=tokens[0])
    ).status_code == 403  # another game's seat
    assert (await ask(server.url, private, repair, bearer=created["watch_token"])).status_code == 200
    seat = created["seats"][0]["token"]
    assert (await ask(server.url, private, repair, bearer=seat)).json()["spaces"] == [
        "oboe",
        "clarinet",
        "flute",
    ]
