"""The HTTP answer to each store error, shared by every route that reads or writes a game."""

from __future__ import annotations

import json

import pytest

from server.store import StoreError, StoreFull, StoreUnavailable, TooManyGames, UnreadableGame
from server.web.http import store_error


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        pytest.param(StoreFull("full"), 507, "store_full", id="full"),
        pytest.param(TooManyGames("cap"), 503, "too_many_games", id="too-many-games"),
        pytest.param(StoreUnavailable("down"), 503, "unavailable", id="unavailable"),
        pytest.param(StoreError("other"), 503, "unavailable", id="any-other"),
    ],
)
def test_each_store_error_has_its_status_and_code(exc: StoreError, status: int, code: str) -> None:
    answer = store_error(exc)
    assert answer.status_code == status
    assert json.loads(bytes(answer.body))["code"] == code


def test_a_damaged_game_names_its_version() -> None:
    answer = store_error(UnreadableGame("g1", 3, "no upcaster"))
    body = json.loads(bytes(answer.body))
    assert answer.status_code == 500
    assert (body["code"], body["game_id"], body["version"]) == ("damaged_game", "g1", 3)
