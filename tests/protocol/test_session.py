"""The protocol session without sockets: what it answers, in what order, for each message and each state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from domain import CannotTakeBack, EndGame, IllegalSpace, Place, TakeBack
from server import auth
from server.protocol.codes import POLICY, TOO_SLOW
from server.protocol.session import (
    HISTORY_CHUNK,
    Action,
    CloseConnection,
    Join,
    Limits,
    ReadHistory,
    SendFrame,
    Session,
    State,
    Submit,
)

SEAT_TOKEN = "seat-one-token"
WATCH_TOKEN = "watch-token"
CREDENTIALS = {auth.seat_key(0): auth.digest("seat-zero-token"), auth.seat_key(1): auth.digest(SEAT_TOKEN)}
PRIVATE = {**CREDENTIALS, auth.WATCH: auth.digest(WATCH_TOKEN)}
VIEW = b'{"game_id":"g1","version":7}'
PLACE = '{"type":"place","id":"c-1","token":{"kind":"performance","era":"baroque"},"space":"viola"}'


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def frames(actions: Sequence[Action]) -> list[dict[str, Any]]:
    return [json.loads(a.data) for a in actions if isinstance(a, SendFrame)]


def hello(**fields: Any) -> str:
    return json.dumps({"type": "hello", **fields})


def joined(token: str | None = SEAT_TOKEN, clock: Clock | None = None, **limits: Any) -> Session:
    session = Session(Limits(**limits), clock or Clock())
    session.receive(hello(token=token))
    session.admit(found=True, public=True, credentials=CREDENTIALS, version=7, view=lambda: VIEW)
    assert session.state is State.OPEN
    return session


def test_a_hello_asks_to_join_its_game() -> None:
    session = Session()
    (join,) = session.receive(hello(token=SEAT_TOKEN, since=3))
    assert isinstance(join, Join) and join.hello.token == SEAT_TOKEN and join.hello.since == 3
    assert session.state is State.JOINING


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(PLACE, id="a-command"),
        pytest.param("not json", id="not-json"),
        pytest.param(None, id="a-binary-frame"),
        pytest.param(json.dumps({"token": None}), id="no-type"),
        pytest.param(json.dumps({"type": "helo"}), id="another-type"),
        pytest.param('{"type": "hello", "token": nul', id="a-hello-that-is-not-json"),
        pytest.param(json.dumps({"type": "hello", "token": "x" * 20_000}), id="a-hello-over-the-frame-limit"),
    ],
)
def test_a_first_frame_that_is_no_hello_closes_with_policy(first: str | None) -> None:
    session = Session()
    assert session.receive(first) == [CloseConnection(POLICY, "the first frame must be hello")]
    assert session.state is State.CLOSED
    assert session.receive(hello()) == []


@pytest.mark.parametrize(
    ("first", "message"),
    [
        pytest.param(hello(view="bogus"), "Invalid enum value 'bogus' - at `$.view`", id="unknown-view-mode"),
        pytest.param(hello(view="patch"), "Invalid enum value 'patch' - at `$.view`", id="gone-view-mode"),
        pytest.param(hello(since=-1), "Expected `int` >= 0 - at `$.since`", id="negative-since"),
        pytest.param(hello(since="3"), "Expected `int | null`, got `str` - at `$.since`", id="since-text"),
        pytest.param(hello(token=42), "Expected `str | null`, got `int` - at `$.token`", id="token-a-number"),
        pytest.param(hello(seat=0), "Object contains unknown field `seat`", id="unknown-field"),
    ],
)
def test_an_invalid_hello_is_a_bad_request_naming_what_is_wrong_then_closes(first: str, message: str) -> None:
    session = Session()
    actions = session.receive(first)
    assert frames(actions) == [
        {"type": "rejected", "id": None, "code": "bad_request", "message": message, "version": 0}
    ]
    assert actions[-1] == CloseConnection(POLICY, message) and session.state is State.CLOSED
    assert session.receive(hello()) == []


def test_a_hello_with_every_field_valid_joins() -> None:
    (join,) = Session().receive(hello(token=None, since=0, view=False))
    assert isinstance(join, Join) and join.hello.view is False and join.hello.since == 0


def test_no_hello_in_time_closes_with_policy_and_a_late_one_is_ignored() -> None:
    session = Session()
    assert session.hello_timed_out() == [CloseConnection(POLICY, "no hello in time")]
    assert session.receive(hello()) == []


def test_a_player_is_welcomed_with_its_seat_the_version_and_the_view_as_given() -> None:
    session = Session()
    session.receive(hello(token=SEAT_TOKEN))
    actions = session.admit(found=True, public=False, credentials=CREDENTIALS, version=7, view=lambda: VIEW)
    (welcome,) = frames(actions)
    assert welcome == {
        "type": "welcome",
        "role": "player",
        "seat": 1,
        "version": 7,
        "view": {"game_id": "g1", "version": 7},
    }
    assert len(actions) == 1 and session.seat == 1 and session.role == "player"


@pytest.mark.parametrize(
    ("token", "public", "credentials", "seat"),
    [
        pytest.param(None, True, CREDENTIALS, None, id="public-spectator"),
        pytest.param(WATCH_TOKEN, False, PRIVATE, None, id="private-game-watch-token"),
        pytest.param(SEAT_TOKEN, False, PRIVATE, 1, id="private-game-seat-token"),
    ],
)
def test_who_may_join(token: str | None, public: bool, credentials: dict[str, str], seat: int | None) -> None:
    session = Session()
    session.receive(hello(token=token))
    (welcome,) = frames(
        session.admit(found=True, public=public, credentials=credentials, version=7, view=lambda: VIEW)
    )
    assert welcome["seat"] == seat
    assert welcome["role"] == ("player" if seat is not None else "spectator")


@pytest.mark.parametrize(
    ("token", "public", "found", "full", "code", "close"),
    [
        pytest.param(None, True, False, False, "unknown_game", POLICY, id="unknown-game"),
        pytest.param(None, False, True, False, "forbidden", POLICY, id="private-game-without-token"),
        pytest.param("another-games-token", True, True, False, "forbidden", POLICY, id="foreign-token"),
        pytest.param(None, True, True, True, "unavailable", TOO_SLOW, id="game-full-of-connections"),
    ],
)
def test_a_refused_join_is_one_rejection_then_the_close(
    token: str | None, public: bool, found: bool, full: bool, code: str, close: int
) -> None:
    session = Session()
    session.receive(hello(token=token))
    encoded: list[bytes] = []

    def view() -> bytes:
        encoded.append(VIEW)
        return VIEW

    actions = session.admit(
        found=found,
        public=public,
        credentials=CREDENTIALS,
        full=full,
        version=4,
        view=view,
    )
    assert encoded == []  # a refused hello costs no encoding of the view
    assert [type(a) for a in actions] == [SendFrame, CloseConnection]
    (refusal,) = frames(actions)
    assert (refusal["type"], refusal["id"], refusal["code"]) == ("rejected", None, code)
    assert isinstance(actions[1], CloseConnection) and actions[1].code == close
    assert session.state is State.CLOSED and session.receive(PLACE) == []


@pytest.mark.parametrize(
    ("since", "after_welcome"),
    [
        pytest.param(None, [], id="no-since-no-history"),
        pytest.param(7, [], id="since-the-current-version"),
        pytest.param(2, [ReadHistory(2, 7)], id="since-an-earlier-version"),
        pytest.param(0, [ReadHistory(0, 7)], id="since-zero-the-whole-history"),
    ],
)
def test_since_asks_for_exactly_the_history_missed(since: int | None, after_welcome: list[Action]) -> None:
    session = Session()
    session.receive(hello(since=since))
    actions = session.admit(found=True, public=True, version=7, view=lambda: VIEW)
    assert frames(actions[:1])[0]["type"] == "welcome"
    assert actions[1:] == after_welcome


def test_since_past_the_version_is_welcomed_then_told_so() -> None:
    session = Session()
    session.receive(hello(since=9))
    welcome, rejection = frames(session.admit(found=True, public=True, version=7, view=lambda: VIEW))
    assert welcome["type"] == "welcome"
    assert (rejection["code"], rejection["id"], rejection["version"]) == ("bad_request", None, 7)
    assert session.state is State.OPEN


def test_history_comes_in_chunks_of_envelopes_in_order() -> None:
    data = [json.dumps({"version": v}).encode() for v in range(1, 2 * HISTORY_CHUNK + 51)]
    sent = frames(Session().history(data))
    assert [len(f["envelopes"]) for f in sent] == [HISTORY_CHUNK, HISTORY_CHUNK, 50]
    assert [e["version"] for f in sent for e in f["envelopes"]] == list(range(1, 2 * HISTORY_CHUNK + 51))
    assert all(set(f) == {"type", "envelopes"} for f in sent)


@pytest.mark.parametrize(
    ("view", "mode"),
    [
        pytest.param(None, "delta", id="default-is-delta"),
        pytest.param("delta", "delta", id="delta"),
        pytest.param("full", "full", id="full"),
        pytest.param(True, "full", id="v1-true-is-full"),
        pytest.param(False, "none", id="false-is-none"),
    ],
)
def test_the_view_mode_a_hello_asks_for(view: object, mode: str) -> None:
    session = Session()
    session.receive(hello() if view is None else hello(view=view))
    assert session.view == mode


def test_a_players_command_is_submitted_with_the_seat_of_its_token() -> None:
    session = joined()
    (submit,) = session.receive(PLACE)
    assert isinstance(submit, Submit) and isinstance(submit.command, Place)
    assert (submit.command.seat, submit.command.id, submit.command.space) == (1, "c-1", "viola")
    (end,) = session.receive('{"type":"end_game","id":"c-2","expected_version":7}')
    assert isinstance(end, Submit) and end.command == EndGame(seat=1, id="c-2", expected_version=7)
    (back,) = session.receive('{"type":"take_back","id":"c-3"}')
    assert isinstance(back, Submit) and back.command == TakeBack(seat=1, id="c-3")
    (back,) = session.receive('{"type":"take_back","id":"c-4","expected_version":7}')
    assert isinstance(back, Submit) and back.command == TakeBack(seat=1, id="c-4", expected_version=7)


@pytest.mark.parametrize(
    ("message", "code", "id"),
    [
        pytest.param(None, "bad_request", None, id="binary"),
        pytest.param("{", "bad_request", None, id="malformed-json"),
        pytest.param('{"type":"place","id":"c-9","space":"viola"}', "bad_request", "c-9", id="missing-field"),
        pytest.param(PLACE[:-1] + ',"seat":0}', "bad_request", "c-1", id="a-seat-field"),
        pytest.param("[" * 10_000 + "]" * 10_000, "too_large", None, id="over-the-frame-limit"),
        pytest.param("[" * 3_000 + "]" * 3_000, "bad_request", None, id="nested-deeper-than-decoded"),
        pytest.param(hello(), "bad_request", None, id="a-second-hello"),
        pytest.param(
            '{"type":"take_back","id":"t-1","seat":0}', "bad_request", "t-1", id="a-take-back-with-seat"
        ),
        pytest.param(
            '{"type":"take_back","id":"t-2","version":6}', "bad_request", "t-2", id="take-back-version"
        ),
        pytest.param('{"type":"take_back"}', "bad_request", None, id="a-take-back-without-id"),
    ],
)
def test_a_bad_frame_is_rejected_with_its_readable_id_and_nothing_submitted(
    message: str | None, code: str, id: str | None
) -> None:
    session = joined()
    (send,) = session.receive(message)
    assert isinstance(send, SendFrame) and send.code == code
    (frame,) = frames([send])
    assert (frame["type"], frame["code"], frame["id"], frame["version"]) == ("rejected", code, id, 7)


def test_a_spectators_command_is_forbidden() -> None:
    session = joined(token=None)
    (frame,) = frames(session.receive(PLACE))
    assert (frame["code"], frame["id"]) == ("forbidden", "c-1")
    (frame,) = frames(session.receive('{"type":"take_back","id":"t-1"}'))
    assert (frame["code"], frame["id"]) == ("forbidden", "t-1")


def test_commands_past_the_burst_are_rate_limited_until_the_bucket_refills() -> None:
    clock = Clock()
    session = joined(clock=clock, rate_per_second=10, rate_burst=3)
    kinds = [type(session.receive(PLACE)[0]) for _ in range(5)]
    assert kinds == [Submit, Submit, Submit, SendFrame, SendFrame]
    (limited,) = frames(session.receive(PLACE))
    assert (limited["code"], limited["id"]) == ("rate_limited", "c-1")
    clock.now += 0.1  # one token back
    assert isinstance(session.receive(PLACE)[0], Submit)
    assert isinstance(session.receive(PLACE)[0], SendFrame)


def test_size_is_checked_before_rate_and_rate_before_shape() -> None:
    clock = Clock()
    session = joined(clock=clock, rate_per_second=1, rate_burst=1, max_frame_bytes=200)
    (too_large,) = frames(session.receive("x" * 201))
    assert too_large["code"] == "too_large"  # spent no token
    (malformed,) = frames(session.receive("{"))
    assert malformed["code"] == "bad_request"  # spent the one token
    (limited,) = frames(session.receive("{"))
    assert limited["code"] == "rate_limited"


def test_an_accepted_answer_carries_the_stored_envelopes_as_they_are() -> None:
    session = joined()
    send = session.accepted("c-1", 9, [b'{"version":8}', b'{"version":9}'])
    assert send.code is None
    assert json.loads(send.data) == {
        "type": "accepted",
        "id": "c-1",
        "version": 9,
        "events": [{"version": 8}, {"version": 9}],
    }


def test_a_refused_command_names_its_rejections_code() -> None:
    session = joined()
    rule = json.loads(session.refused("c-1", IllegalSpace("not there"), 8).data)
    assert (rule["code"], rule["id"], rule["message"], rule["version"]) == (
        "illegal_space",
        "c-1",
        "not there",
        8,
    )
    back = json.loads(session.refused("t-1", CannotTakeBack("not yours"), 8).data)
    assert (back["code"], back["id"], back["message"]) == ("cannot_take_back", "t-1", "not yours")
    # Later refusals carry the version last told.
    (late,) = frames(session.receive(None))
    assert late["version"] == 8
