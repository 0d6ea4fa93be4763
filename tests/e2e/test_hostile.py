"""Malformed and hostile frames on live connections: each gets its exact answer and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
import pytest

from orchestra_client import ConnectionRefused, GameClient, get_view
from tests.support.e2e import (
    PERF,
    REJECTION_KEYS,
    STRINGS,
    assert_clean_logs,
    expect_accepted,
    new_game,
    next_answer,
)

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

MAX_FRAME = 32 * 1024  # large enough to parse 10,000 nested arrays; the limit itself is tested too
RARE = {"kind": "instrument", "instrument": "rare_strings"}


def place(**fields: Any) -> str:
    """A place frame as JSON text: a valid one, with `fields` changed (None removes a field)."""
    frame: dict[str, Any] = {"type": "place", "id": "h-1", "token": PERF, "space": "viola"}
    frame.update(fields)
    return json.dumps({k: v for k, v in frame.items() if v is not None}, ensure_ascii=False)


def padded(size: int) -> str:
    """A valid place frame padded with whitespace to exactly `size` bytes."""
    text = place(id="big")
    return text[:-1] + " " * (size - len(text)) + "}"


class Case(NamedTuple):
    frame: str | bytes
    code: str
    id: str | None
    message: str  # a part of the rejection's message
    role: str = "player"  # the player in seat 1, or "spectator"
    ended: bool = False  # the game was ended (by seat 0) before the frame


def case(frame: str | bytes, code: str, id: str | None, message: str, name: str, **kw: Any) -> Any:
    return pytest.param(Case(frame, code, id, message, **kw), id=name)


CASES = [
    # Not JSON, or not an object.
    case('{"type": place}', "bad_request", None, "malformed", "bad-json"),
    case('{"type": "place", "id": "h-1", "token": {', "bad_request", None, "truncated", "truncated-json"),
    case("", "bad_request", None, "truncated", "empty-frame"),
    case("[1, 2]", "bad_request", None, "Expected `object`, got `array`", "json-array"),
    case("42", "bad_request", None, "Expected `object`, got `int`", "json-number"),
    case('"place"', "bad_request", None, "Expected `object`, got `str`", "json-string"),
    case("null", "bad_request", None, "Expected `object`, got `null`", "json-null"),
    case("[" * 10_000 + "]" * 10_000, "bad_request", None, "got `array`", "deep-nesting-top-level"),
    case(
        '{"type": "place", "id": "deep", "token": ' + "[" * 10_000 + "]" * 10_000 + "}",
        "bad_request",
        None,  # deeper than any decoder goes: the frame is not readable, so neither is its id
        "$.token",
        "deep-nesting-in-a-field",
    ),
    case(b"\x00\x01binary", "bad_request", None, "binary", "binary-frame"),
    case(place().encode(), "bad_request", None, "binary", "binary-frame-holding-a-valid-command"),
    # The type.
    case(place(type="teleport"), "bad_request", "h-1", "Invalid value 'teleport'", "unknown-type"),
    case(place(type=None), "bad_request", "h-1", "missing required field `type`", "missing-type"),
    case('{"type": "hello", "token": null}', "bad_request", None, "hello", "second-hello"),
    # Missing and unknown fields.
    case(place(token=None), "bad_request", "h-1", "missing required field `token`", "missing-token"),
    case(place(space=None), "bad_request", "h-1", "missing required field `space`", "missing-space"),
    case(place(id=None), "bad_request", None, "missing required field `id`", "missing-id"),
    case('{"type": "end_game"}', "bad_request", None, "missing required field `id`", "end-game-without-id"),
    case(place(seat=0), "bad_request", "h-1", "unknown field `seat`", "seat-field-the-seat-comes-from-token"),
    case(place(colour="red"), "bad_request", "h-1", "unknown field `colour`", "unknown-field"),
    case(
        place(token={**PERF, "family": "winds"}), "bad_request", "h-1", "`family`", "unknown-field-in-token"
    ),
    case(
        '{"type": "end_game", "id": "e-1", "seat": 0}', "bad_request", "e-1", "`seat`", "end-game-with-seat"
    ),
    # Wrong types and values outside their type.
    case(place(skill="3"), "bad_request", "h-1", "Expected `int`, got `str` - at `$.skill`", "string-skill"),
    case(place(skill=3.5), "bad_request", "h-1", "Expected `int`, got `float`", "float-skill"),
    case(place(skill=True), "bad_request", "h-1", "Expected `int`, got `bool`", "bool-skill"),
    case(place(skill=10**30), "bad_request", "h-1", "<= 10", "huge-skill"),
    case(place(skill=-1), "bad_request", "h-1", ">= 1", "negative-skill"),
    case(place(skill=0), "bad_request", "h-1", ">= 1", "zero-skill"),
    case(place(skill=11), "bad_request", "h-1", "<= 10", "skill-over-ten"),
    case(place(expected_version=-5), "bad_request", "h-1", "$.expected_version", "negative-expected-version"),
    case(place(expected_version="2"), "bad_request", "h-1", "$.expected_version", "string-expected-version"),
    case(place(consolation="gold"), "bad_request", "h-1", "$.consolation", "unknown-consolation"),
    case(place(token="performance"), "bad_request", "h-1", "$.token", "token-not-an-object"),
    # Ids outside [A-Za-z0-9._:-]{1,64}: echoed when they are strings, null otherwise.
    case(place(id=""), "bad_request", "", "$.id", "empty-id"),
    case(place(id="x" * 65), "bad_request", "x" * 65, "$.id", "id-of-65-characters"),
    case(place(id="two words"), "bad_request", "two words", "$.id", "id-with-a-space"),
    case(place(id="über"), "bad_request", "über", "$.id", "id-with-unicode"),
    case(place(id="c-1\n"), "bad_request", "c-1\n", "$.id", "id-with-a-trailing-newline"),
    case(place(id="c\u00001"), "bad_request", "c\u00001", "$.id", "id-with-a-nul-character"),
    case(place(id=7), "bad_request", None, "Expected `str`, got `int` - at `$.id`", "id-that-is-a-number"),
    case(place(id={"id": "x"}), "bad_request", None, "$.id", "id-that-is-an-object"),
    # Ids and names the layout does not know.
    case(place(space="moon"), "bad_request", "h-1", "'moon' is not a space", "unknown-space"),
    case(place(space="vi\u0000ola"), "bad_request", "h-1", "is not a space", "nul-character-in-a-space"),
    case(
        place(token={"kind": "instrument", "instrument": "kazoo"}),
        "bad_request",
        "h-1",
        "'kazoo' is not an instrument",
        "unknown-instrument",
    ),
    case(
        place(token={"kind": "performance", "era": "modern"}), "bad_request", "h-1", "'modern'", "unknown-era"
    ),
    case(
        place(token={"kind": "repair", "family": "brass"}), "bad_request", "h-1", "'brass'", "unknown-family"
    ),
    case(place(token={"kind": "spell", "era": "classical"}), "bad_request", "h-1", "'spell'", "unknown-kind"),
    # Unreadable strings.
    case(place().replace('"viola"', '"\\ud800"'), "bad_request", None, "", "lone-surrogate-in-a-space"),
    case(
        place().replace('"h-1"', '"h\\ud800"'), "bad_request", None, "surrogate", "lone-surrogate-in-the-id"
    ),
    case(place().replace('"viola"', '"vi\x00ola"'), "bad_request", None, "invalid character", "raw-nul"),
    # Materials.
    case(place(materials=["wood"]), "bad_request", "h-1", "viola does not", "materials-on-a-non-rare-space"),
    case(
        place(token=RARE, space="rare_strings", materials=["wood", "metal"]),
        "bad_request",
        "h-1",
        "not 2",
        "two-materials-without-doubling",
    ),
    case(
        place(token=RARE, space="rare_strings", skill=6, materials=["wood"]),
        "bad_request",
        "h-1",
        "not 1",
        "one-material-when-doubled",
    ),
    case(
        place(token=RARE, space="rare_strings", materials="wood"),
        "bad_request",
        "h-1",
        "$.materials",
        "materials-not-a-list",
    ),
    case(
        place(token=RARE, space="rare_strings", materials=["gold"]),
        "bad_request",
        "h-1",
        "$.materials",
        "unknown-material",
    ),
    # Size: checked before anything else, so no id.
    case(padded(MAX_FRAME + 1), "too_large", None, str(MAX_FRAME), "frame-one-byte-over-the-limit"),
    case(
        place(id="é" * (MAX_FRAME // 2 + 1)),
        "too_large",
        None,
        str(MAX_FRAME),
        "frame-over-the-limit-in-bytes-not-characters",
    ),
    # Access.
    case(place(), "forbidden", "h-1", "spectators", "spectator-place", role="spectator"),
    case(
        '{"type": "end_game", "id": "e-1"}',
        "forbidden",
        "e-1",
        "spectators",
        "spectator-end-game",
        role="spectator",
    ),
    case("[]", "bad_request", None, "got `array`", "spectator-malformed-frame", role="spectator"),
    case(b"\x00", "bad_request", None, "binary", "spectator-binary-frame", role="spectator"),
    case('{"type": "hello"}', "bad_request", None, "hello", "spectator-second-hello", role="spectator"),
    case(padded(MAX_FRAME + 1), "too_large", None, str(MAX_FRAME), "spectator-too-large", role="spectator"),
    case('{"type": "end_game", "id": "e-1"}', "forbidden", "e-1", "seat 0", "end-game-from-seat-1"),
    # The game, the rule, the choices.
    case(place(token=STRINGS, space="oboe"), "illegal_space", "h-1", "cannot go to oboe", "illegal-space"),
    case(
        place(token={"kind": "repair", "family": "strings"}, space="rare_strings"),
        "illegal_space",
        "h-1",
        "rare_strings",
        "repair-on-a-rare-space",
    ),
    case(place(token=RARE, space="rare_strings"), "missing_choice", "h-1", "material", "missing-material"),
    case(
        place(token=RARE, space="rare_strings", materials=[]),
        "missing_choice",
        "h-1",
        "material",
        "empty-materials",
    ),
    case(place(expected_version=1), "stale_version", "h-1", "version 2", "stale-version"),
    case(place(expected_version=10**40), "stale_version", "h-1", "version 2", "huge-expected-version"),
    case(place(), "game_over", "h-1", "", "place-after-the-end", ended=True),
    # Precedence: frame, then access, then the game, then the rule, then the choices.
    case(
        '{"type": "end_game", "id": "e-1", "x": 1}',
        "bad_request",
        "e-1",
        "`x`",
        "bad-request-before-forbidden",
    ),
    case(
        place(), "forbidden", "h-1", "spectators", "forbidden-before-game-over", role="spectator", ended=True
    ),
    case(
        place(token=STRINGS, space="oboe"),
        "game_over",
        "h-1",
        "",
        "game-over-before-illegal-space",
        ended=True,
    ),
    case(
        place(token=STRINGS, space="oboe", expected_version=1),
        "stale_version",
        "h-1",
        "",
        "stale-version-before-illegal-space",
    ),
    case(
        place(token=RARE, space="viola"),
        "illegal_space",
        "h-1",
        "viola",
        "illegal-space-before-missing-choice",
    ),
]


@pytest.fixture(scope="module")
def hostile_server(start_module_server: Any) -> Any:
    """One server for every frame of the table."""
    return start_module_server(max_frame_bytes=MAX_FRAME)


@pytest.fixture(scope="module")
def bystander(hostile_server: Any) -> Iterator[tuple[str, str]]:
    """Another game on the same server, whose player must keep being served: its id and seat token."""
    with httpx.Client(base_url=hostile_server.url, timeout=10) as http:
        created = http.post("/games", json={"players": ["Zoe"]}).json()
    yield created["game_id"], created["seats"][0]["token"]


async def assert_still_served(url: str, bystander: tuple[str, str]) -> None:
    """A player of another game gets an accepted answer."""
    game_id, token = bystander
    async with await GameClient.connect(url, game_id, token, reconnect=False) as other:
        answer = await other.place(STRINGS, "cello")
        assert answer["type"] == "accepted", answer


@pytest.mark.parametrize("hostile", CASES)
async def test_a_hostile_frame_gets_its_exact_answer_and_changes_nothing(
    hostile_server: Any, bystander: tuple[str, str], hostile: Case
) -> None:
    url = hostile_server.url
    game_id, tokens = await new_game(url, ["Ada", "Ben"])
    ada = await GameClient.connect(url, game_id, tokens[0], reconnect=False)
    ben = await GameClient.connect(url, game_id, tokens[1], reconnect=False)
    clients = [ada, ben]
    try:
        warm_up = await ben.place(PERF, "viola", id="warm-up")
        assert warm_up["type"] == "accepted" and warm_up["version"] == 2
        if hostile.ended:
            expect_accepted(await ada.end_game(id="the-end"))
        sender = ben
        if hostile.role == "spectator":
            sender = await GameClient.connect(url, game_id, reconnect=False)
            clients.append(sender)
        before = await get_view(url, game_id)

        await sender.send_raw(hostile.frame)
        answer = await next_answer(sender)

        assert set(answer) == REJECTION_KEYS
        assert answer["type"] == "rejected"
        assert (answer["code"], answer["id"]) == (hostile.code, hostile.id)
        assert answer["version"] == before["version"]
        assert isinstance(answer["message"], str) and answer["message"]
        assert hostile.message in answer["message"]
        assert await get_view(url, game_id) == before
        # The same socket keeps working.
        if hostile.role == "spectator" and hostile.ended:
            assert await ben.place(STRINGS, "cello", id="warm-up") == warm_up
            await sender.send_raw(place(id="again"))
            assert (await next_answer(sender))["code"] == "forbidden"
            sender.received.pop()
        elif hostile.role == "spectator":
            follow = await ben.place(STRINGS, "cello")
            assert follow["type"] == "accepted", follow
            await sender.wait_for_version(follow["version"], timeout=5)
        elif hostile.ended:
            assert await ben.place(STRINGS, "cello", id="warm-up") == warm_up
        else:
            follow = await ben.place(STRINGS, "cello")
            assert follow["type"] == "accepted" and follow["version"] == before["version"] + 1
        assert [f for f in sender.received if f["type"] == "rejected"] == [answer]
        await assert_still_served(url, bystander)
    finally:
        for client in clients:
            await client.close()
    assert_clean_logs(hostile_server.logs())


async def test_a_frame_far_over_the_limit_closes_with_1009_and_others_are_still_served(
    hostile_server: Any, bystander: tuple[str, str]
) -> None:
    url = hostile_server.url
    game_id, tokens = await new_game(url, ["Ada"])
    before = await get_view(url, game_id)
    async with await GameClient.connect(url, game_id, tokens[0], reconnect=False) as ada:
        await ada.send_raw(padded(10 * MAX_FRAME))
        with pytest.raises(ConnectionRefused) as closed:
            await ada.next_frame(timeout=5)
        assert closed.value.code == 1009
    assert await get_view(url, game_id) == before
    await assert_still_served(url, bystander)


@pytest.fixture(scope="module")
def strict_server(start_module_server: Any) -> Any:
    """A server with a small rate and a small placement limit."""
    return start_module_server(rate_per_second=5, rate_burst=5, max_placements=3)


async def test_a_flood_past_the_burst_is_rate_limited_without_changing_the_game(strict_server: Any) -> None:
    url = strict_server.url
    game_id, tokens = await new_game(url, ["Ada", "Ben"])
    async with await GameClient.connect(url, game_id, tokens[1], reconnect=False) as ben:
        flood = [place(id=f"f-{n}", expected_version=1, space="oboe") for n in range(20)]
        # Right behind the flood, while the bucket is still empty (sent later, after the reads below, it
        # could find a token refilled on a slow machine): a rate-limited frame is not parsed, so a
        # malformed one is rate_limited too, with no id.
        for frame in [*flood, "{not json"]:
            await ben.send_raw(frame)
        answers = [await next_answer(ben) for _ in flood]
        unparsed = await next_answer(ben)
        assert (unparsed["code"], unparsed["id"]) == ("rate_limited", None)
        limited = [a for a in answers if a["code"] == "rate_limited"]
        assert [a["id"] for a in answers] == [f"f-{n}" for n in range(20)]
        assert all(a["type"] == "rejected" for a in answers)
        assert len(limited) >= 10 and all(set(a) == REJECTION_KEYS for a in limited)
        assert all(a["code"] in ("rate_limited", "stale_version", "illegal_space") for a in answers)
        assert [a["code"] for a in answers[:5]] == ["illegal_space"] * 5  # the burst itself is decided
        assert (await get_view(url, game_id))["version"] == 1
    assert_clean_logs(strict_server.logs())


@pytest.fixture(scope="module")
def placement_limited_server(start_module_server: Any) -> Any:
    """A server with a small placement limit and no rate to speak of (the limit is the subject)."""
    return start_module_server(rate_per_second=100_000, rate_burst=100_000, max_placements=3)


async def test_a_placement_past_the_game_limit_is_limit_reached(placement_limited_server: Any) -> None:
    url = placement_limited_server.url
    game_id, tokens = await new_game(url, ["Ada", "Ben"])
    async with await GameClient.connect(url, game_id, tokens[0], reconnect=False) as ada:
        for space in ("viola", "clarinet", "timpani"):
            expect_accepted(await ada.place(PERF, space))
        refused = await ada.place(PERF, "violin_bc", id="fourth")
        assert (refused["type"], refused["code"], refused["id"]) == ("rejected", "limit_reached", "fourth")
        assert refused["version"] == 4 and set(refused) == REJECTION_KEYS
        # The game comes before the rule: an illegal placement is limit_reached too.
        illegal = await ada.place(STRINGS, "oboe", id="fifth")
        assert illegal["code"] == "limit_reached"
        assert (await get_view(url, game_id))["version"] == 4
        expect_accepted(await ada.end_game())
