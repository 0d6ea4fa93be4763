"""The version a session's rejections carry: the game's version as the shell last told it, never older than
what the connection was already sent (protocol.md section 3, `rejected.version`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.engine.owner import HistoryLost
from server.protocol.session import SendFrame, Session, State

PLACE = '{"type":"place","id":"c-1","token":{"kind":"performance","era":"baroque"},"space":"viola"}'


def admitted() -> Session:
    session = Session()
    session.receive(json.dumps({"type": "hello", "token": None}))
    session.admit(found=True, public=True, version=1)
    assert session.state is State.OPEN
    return session


def rejection(actions: list[Any]) -> dict[str, Any]:
    (send,) = actions
    assert isinstance(send, SendFrame)
    frame: dict[str, Any] = json.loads(send.data)
    assert frame["type"] == "rejected"
    return frame


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param("x" * (16 * 1024 + 1), "too_large", id="too-large"),
        pytest.param("{", "bad_request", id="malformed"),
        pytest.param(None, "bad_request", id="binary"),
        pytest.param('{"type":"hello"}', "bad_request", id="second-hello"),
        pytest.param(PLACE, "forbidden", id="spectator-command"),
    ],
)
def test_a_frame_refused_by_the_session_carries_the_version_the_shell_gives(
    text: str | None, code: str
) -> None:
    session = admitted()
    refused = rejection(session.receive(text, 4))
    assert (refused["code"], refused["version"]) == (code, 4)


def test_the_version_never_goes_back() -> None:
    session = admitted()
    assert rejection(session.receive("{", 6))["version"] == 6
    assert rejection(session.receive("{", 5))["version"] == 6  # an older one told late changes nothing
    session.accepted("c-1", 2, [])  # a repeated id's first answer, long past
    assert rejection(session.receive("{"))["version"] == 6
    session.refused("c-2", HistoryLost("gone"), 7)
    assert rejection(session.receive("{"))["version"] == 7


def test_a_repeated_id_whose_envelopes_are_gone_is_history_lost() -> None:
    answer = admitted().refused("c-1", HistoryLost("this id was accepted as version 2, ..."), 9)
    assert answer.code == "history_lost"
    frame = json.loads(answer.data)
    assert (frame["id"], frame["code"], frame["version"]) == ("c-1", "history_lost", 9)
