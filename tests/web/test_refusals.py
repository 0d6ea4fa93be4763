"""The shell's answer to a command the store refused: each store error as its code, worded by the session."""

from __future__ import annotations

import json

import pytest

from domain import IllegalSpace, Rejected
from server.protocol.codes import CODES
from server.protocol.session import Session, State
from server.store import (
    ConcurrencyConflict,
    GameFenced,
    StoreError,
    StoreFull,
    StoreUnavailable,
    UnreadableGame,
)
from server.web.refusals import rejection


def joined() -> Session:
    session = Session()
    session.receive(json.dumps({"type": "hello", "token": None}))
    session.admit(found=True, public=True, version=1)
    assert session.state is State.OPEN
    return session


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        pytest.param(StoreUnavailable("down"), "unavailable", "retry with the same id", id="unavailable"),
        pytest.param(StoreError("redis: ?"), "unavailable", "retry with the same id", id="other-store-error"),
        pytest.param(TimeoutError(), "unavailable", "retry with the same id", id="timeout"),
        pytest.param(ConcurrencyConflict("g", 1, 2), "unavailable", "retry", id="conflict-past-retries"),
        pytest.param(StoreFull("redis: OOM"), "store_full", "the command was not written", id="full"),
        pytest.param(GameFenced("g"), "archiving", "being archived", id="fenced"),
        pytest.param(UnreadableGame("g", 7, "bad json"), "damaged_game", "version 7", id="damaged"),
    ],
)
def test_a_store_error_is_answered_with_its_code(error: Exception, code: str, words: str) -> None:
    refusal = rejection(error)
    assert isinstance(refusal, Rejected) and refusal.code == code and code in CODES
    answer = joined().refused("c-3", refusal, 5)
    assert answer.code == code
    frame = json.loads(answer.data)
    assert (frame["type"], frame["id"], frame["code"], frame["version"]) == ("rejected", "c-3", code, 5)
    assert words in frame["message"]


def test_a_store_that_is_full_says_so_whole() -> None:
    answer = joined().refused("c-3", rejection(StoreFull("redis: OOM")), 5)
    assert json.loads(answer.data) == {
        "type": "rejected",
        "id": "c-3",
        "code": "store_full",
        "message": "the event store is full; the command was not written",
        "version": 5,
    }


def test_a_rules_rejection_is_its_own_answer() -> None:
    refused = IllegalSpace("not there")
    assert rejection(refused) is refused
