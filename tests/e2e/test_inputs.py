"""What clients send is read strictly: numbers are ASCII digits, names follow the name rules (trimmed and NFC,
1 to 32 characters, nothing invisible, unique ignoring case). (Close reasons: tests/protocol.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

# Each of these int() would take, or str.isdigit() would call a digit: none is a number here.
NOT_ASCII_NUMBERS = ["\u0661\u0662", "1_0", " 1", "1 ", "+1", "\uff11", "\u00b2", "1\u0660", "0x1", "1e1", ""]


@pytest.fixture(scope="module")
def api(start_module_server: Any) -> Any:
    return start_module_server()


@pytest.fixture
async def http(api: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as client:
        yield client


def assert_bad_request(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "bad_request"


@pytest.mark.parametrize("value", NOT_ASCII_NUMBERS)
async def test_numeric_query_parameters_take_ascii_digits_only(http: httpx.AsyncClient, value: str) -> None:
    game_id = (await http.post("/games", json={"players": ["Ada"]})).json()["game_id"]
    assert_bad_request(await http.get("/games", params={"limit": value}))
    assert_bad_request(await http.get(f"/games/{game_id}", params={"at": value}))
    assert_bad_request(await http.get(f"/games/{game_id}/events", params={"after": value}))


async def test_the_same_parameters_in_ascii_digits_are_read(http: httpx.AsyncClient) -> None:
    game_id = (await http.post("/games", json={"players": ["Ada"]})).json()["game_id"]
    assert len((await http.get("/games", params={"limit": "1"})).json()) == 1
    assert (await http.get(f"/games/{game_id}", params={"at": "1"})).json()["version"] == 1
    assert (await http.get(f"/games/{game_id}/events", params={"after": "01"})).text == ""


async def test_names_are_kept_trimmed_and_in_nfc(http: httpx.AsyncClient) -> None:
    answer = await http.post("/games", json={"players": ["  Ada\t", "Zoe\u0301", "李 小龍"]})
    assert answer.status_code == 201, answer.text
    created = answer.json()
    assert [seat["name"] for seat in created["seats"]] == ["Ada", "Zo\u00e9", "李 小龍"]
    view = (await http.get(f"/games/{created['game_id']}")).json()
    assert [player["name"] for player in view["players"]] == ["Ada", "Zo\u00e9", "李 小龍"]
    listed = {g["game_id"]: g for g in (await http.get("/games")).json()}
    assert listed[created["game_id"]]["players"] == ["Ada", "Zo\u00e9", "李 小龍"]


@pytest.mark.parametrize(
    ("players", "reason"),
    [
        pytest.param(["Ada", "ada"], "already seat 0's", id="same-name-other-case"),
        pytest.param(["Ada", " ADA "], "already seat 0's", id="same-name-padded"),
        pytest.param(["x" * 33], "1 to 32 characters", id="33-characters"),
        pytest.param(["   "], "1 to 32 characters", id="blank"),
        pytest.param(["A\u202eda"], "U+202E", id="bidi-override"),
        pytest.param(["A\u200bda"], "U+200B", id="zero-width-space"),
        pytest.param(["A\u0007da"], "U+0007", id="control"),
        pytest.param(["x" * 200], "length <= 128", id="far-too-long"),
    ],
)
async def test_names_breaking_the_rules_are_a_bad_request_saying_why(
    http: httpx.AsyncClient, players: list[str], reason: str
) -> None:
    answer = await http.post("/games", json={"players": players})
    assert_bad_request(answer)
    assert reason in answer.json()["message"]
