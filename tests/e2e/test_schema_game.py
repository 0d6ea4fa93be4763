"""GET /schema.json as a client author uses it: ajv compiles it in strict mode under Node, and every frame of
a real game (both directions), every envelope and every view validates against its entry point, with ajv
and with Python's jsonschema alike; frames the server never sends do not.

The game runs on a real server (uvicorn on a free port, the session's Redis) and covers every kind of
placement and a take-back, every rejection a client can cause, each hello view mode (deltas, whole views,
none), history after a resume, and the end. The Node side is tests/schema_node (`npm ci --prefix
tests/schema_node`).
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import jsonschema
import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from server.protocol.codes import CODES
from server.protocol.frames import ClientFrame
from tests.support.e2e import PERF, STRINGS
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

NODE_DIR = Path(__file__).resolve().parents[1] / "schema_node"
MAX_PLACEMENTS = 10
WINDS = {"kind": "repair", "family": "winds"}
RARE_STRINGS = {"kind": "instrument", "instrument": "rare_strings"}
VIOLA = {"kind": "instrument", "instrument": "viola"}


def node_or_skip() -> str:
    """The `node` executable with ajv installed beside the checker, or a skip saying what is missing."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed (.ci/run installs it: apt-get install nodejs npm)")
    if not (NODE_DIR / "node_modules" / "ajv" / "package.json").exists():
        pytest.skip(f"ajv is not installed: run `npm ci --prefix {NODE_DIR}`")
    return node


def ajv(schema: Any, items: list[tuple[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    """Each (definition, value) checked by ajv in strict mode, in order; fails if the schema does not
    compile."""
    node = node_or_skip()
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    done = run_checker(node, path, items)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(items)
    return results


def run_checker(node: str, schema: Path, items: list[tuple[str, Any]]) -> subprocess.CompletedProcess[str]:
    lines = "".join(json.dumps({"def": name, "value": value}) + "\n" for name, value in items)
    return subprocess.run(
        [node, str(NODE_DIR / "validate.mjs"), str(schema)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def python_validator(schema: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    """A validator of one entry point, as protocol.md shows it for Python."""
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": schema["$defs"]})


class Peer:
    """One websocket client that records every frame it sends and receives."""

    def __init__(self, name: str, ws: websockets.ClientConnection) -> None:
        self.name, self.ws = name, ws
        self.sent: list[Any] = []  # the valid frames it sent (the invalid ones are not client frames)
        self.received: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for text in self.ws:
                self.received.append(json.loads(text))
        except ConnectionClosed:
            pass
        self.close_code = self.ws.close_code

    async def send(self, frame: Any, valid: bool = True) -> None:
        if valid:
            self.sent.append(frame)
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def until(self, check: Any, timeout: float = 10.0) -> Any:
        """The first received frame for which `check` holds, waiting for it."""
        return await until(
            lambda: next((frame for frame in self.received if check(frame)), None),
            timeout,
            f"{self.name}'s frame",
        )

    async def command(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a command and wait for its answer."""
        await self.send(frame)
        answer: dict[str, Any] = await self.until(
            lambda f: f["type"] in ("accepted", "rejected") and f["id"] == frame["id"]
        )
        return answer

    async def close(self) -> None:
        await self.ws.close()
        await self._reader


async def connect(url: str, game_id: str, name: str, valid: bool = True, **hello: Any) -> Peer:
    ws = await websockets.connect(
        url.replace("http://", "ws://") + f"/games/{game_id}/ws", open_timeout=10, max_size=None
    )
    peer = Peer(name, ws)
    await peer.send({"type": "hello", **hello}, valid)
    await peer.until(lambda f: f["type"] in ("welcome", "rejected"))
    return peer


class Played:
    """Everything a real game put on the wire."""

    def __init__(self) -> None:
        self.peers: list[Peer] = []
        self.envelopes: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []
        self.codes: Counter[str] = Counter()

    @property
    def server_frames(self) -> Iterator[dict[str, Any]]:
        return (frame for peer in self.peers for frame in peer.received)

    @property
    def client_frames(self) -> Iterator[Any]:
        return (frame for peer in self.peers for frame in peer.sent)


async def play(url: str) -> Played:
    played = Played()
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        created = (await http.post("/games", json={"players": ["Ada", "Ben", "Cy", "Dan"]})).json()
        game_id, tokens = created["game_id"], [seat["token"] for seat in created["seats"]]
        full = await connect(url, game_id, "full", token=None, view="full")
        v1 = await connect(url, game_id, "v1", token=None, since=None, view=True)
        bare = await connect(url, game_id, "bare", token=None, view=False)
        ada, ben, cy = [
            await connect(url, game_id, n, token=t)
            for n, t in zip(("Ada", "Ben", "Cy"), tokens[:3], strict=True)
        ]
        dan = await connect(url, game_id, "Dan", token=tokens[3], since=1, view="delta")
        played.peers += [full, v1, bare, ada, ben, cy, dan]

        async def accepted(peer: Peer, **frame: Any) -> dict[str, Any]:
            answer = await peer.command({"type": "place", **frame})
            assert answer["type"] == "accepted", answer
            return answer

        async def refused(peer: Peer, code: str, frame: dict[str, Any]) -> None:
            answer = await peer.command(frame)
            assert (answer["type"], answer["code"]) == ("rejected", code), answer

        # Every kind of placement.
        await accepted(ada, id="a-1", token=PERF, space="viola")  # an empty chair: claimed
        await accepted(ben, id="b-1", token=STRINGS, space="viola")  # 1 against 1: below the line
        await accepted(ben, id="b-2", token=PERF, space="viola", consolation="inspiration")  # majority
        await accepted(ben, id="b-3", token=STRINGS, space="viola")  # his own chair
        await accepted(cy, id="c-1", token=VIOLA, space="viola", skill=6)  # an instrument steals, doubled
        await accepted(dan, id="d-1", token=PERF, space="viola")  # an instrument holds
        await accepted(cy, id="c-2", token=RARE_STRINGS, space="rare_strings", materials=["wood"])
        doubled = {
            "token": RARE_STRINGS,
            "space": "rare_strings",
            "skill": 6,
            "materials": ["metal", "animal"],
        }
        await accepted(dan, id="d-2", **doubled)
        # Dan takes back his last placement (the event count stays that of one more placement).
        taken = await dan.command({"type": "take_back", "id": "d-3"})
        assert taken["events"][0]["event"] == {"type": "PlacementTakenBack", "seat": 3, "version": 9}
        # Every rejection a player can cause.
        await refused(ben, "illegal_space", {"type": "place", "id": "b-4", "token": WINDS, "space": "viola"})
        await refused(
            cy,
            "missing_choice",
            {"type": "place", "id": "c-3", "token": RARE_STRINGS, "space": "rare_strings"},
        )
        await refused(
            ada,
            "stale_version",
            {"type": "place", "id": "a-2", "token": PERF, "space": "cello", "expected_version": 3},
        )
        await refused(ben, "forbidden", {"type": "end_game", "id": "b-5"})
        await refused(ben, "cannot_take_back", {"type": "take_back", "id": "b-13"})
        # bad_request: frames outside the schema, then frames inside it that the rules cannot read.
        for valid, mistake in (
            (False, {"type": "place", "id": "b-6", "token": PERF, "space": "timpani", "seat": 0}),
            (False, {"type": "place", "id": "b-7\n", "token": PERF, "space": "viola"}),
            (True, {"type": "place", "id": "b-8", "token": PERF, "space": "viola", "materials": ["wood"]}),
            (
                True,
                {
                    "type": "place",
                    "id": "b-9",
                    "token": RARE_STRINGS,
                    "space": "rare_strings",
                    "materials": ["wood", "wood"],
                },
            ),
            (True, {"type": "place", "id": "b-10", "token": PERF, "space": "harp"}),
        ):
            await ben.send(mistake, valid=valid)
            answer = await ben.until(lambda f, i=mistake["id"]: f["type"] == "rejected" and f["id"] == i)
            assert answer["code"] == "bad_request", answer
        await ben.send('{"type": "place", "id": "b-11", "token": ', valid=False)
        await ben.send("x" * 17_000, valid=False)
        await ben.send({"type": "hello", "token": None})
        await ben.until(lambda f: f["type"] == "rejected" and f["code"] == "too_large")
        await refused(bare, "forbidden", {"type": "end_game", "id": "s-1"})
        await accepted(ada, id="a-3", token=PERF, space="clarinet", expected_version=10)
        await refused(ben, "limit_reached", {"type": "place", "id": "b-12", "token": PERF, "space": "cello"})
        # A spectator over the rate: its frames are refused before they are read.
        for number in range(130):
            await bare.send({"type": "end_game", "id": f"flood-{number}"})
        await bare.until(lambda f: f["type"] == "rejected" and f["id"] == "flood-129")
        # The end, and a placement after it.
        ended = await ada.command({"type": "end_game", "id": "a-4", "expected_version": 11})
        assert ended["events"][0]["event"]["type"] == "GameEnded"
        await refused(cy, "game_over", {"type": "place", "id": "c-4", "token": PERF, "space": "cello"})
        # Resumes: a late spectator's history, and a `since` past the game.
        late = await connect(url, game_id, "late", token=None, since=1, view=False)
        ahead = await connect(url, game_id, "ahead", token=None, since=99)
        await ahead.until(lambda f: f["type"] == "rejected" and f["code"] == "bad_request")
        played.peers += [late, ahead]
        # Refused hellos: an unknown game, a token of no seat, an invalid hello.
        played.peers.append(await connect(url, "no-such-game", "lost", token=None))
        played.peers.append(await connect(url, game_id, "stranger", token="not-a-token"))
        played.peers.append(await connect(url, game_id, "bogus", False, token=None, view="bogus"))

        for peer in (full, v1, bare, ada, ben, cy, dan, late):
            await peer.until(lambda f: f["type"] == "events" and f["envelopes"][-1]["version"] == 12)
        table_id = await play_a_table(url, http, played)
        for peer in played.peers:
            await peer.close()
        played.envelopes = [
            json.loads(line)
            for game in (game_id, table_id)
            for line in (await http.get(f"/games/{game}/events")).text.splitlines()
        ]
        played.views = [(await http.get(f"/games/{game_id}", params={"at": n})).json() for n in range(1, 13)]
    played.codes.update(f["code"] for f in played.server_frames if f["type"] == "rejected")
    return played


async def play_a_table(url: str, http: httpx.AsyncClient, played: Played) -> str:
    """A table (issue 40): open seats taken and closed, a token reissued, the end, and the next game;
    every refusal of them a client can cause. Its id."""
    created = (await http.post("/games", json={"players": ["Eve", None, None]})).json()
    game_id, host = created["game_id"], {"authorization": f"Bearer {created['host_token']}"}
    tokens = [seat["token"] for seat in created["seats"]]
    eve, fay, gus = [
        await connect(url, game_id, n, token=t) for n, t in zip(("Eve", "Fay", "Gus"), tokens, strict=True)
    ]
    played.peers += [eve, fay, gus]

    async def answer(peer: Peer, frame: dict[str, Any], expected: str) -> dict[str, Any]:
        got = await peer.command(frame)
        assert (got["type"], got.get("code", "accepted")) == ("rejected", expected) or (
            got["type"] == expected
        ), got
        return got

    await answer(eve, {"type": "place", "id": "e-1", "token": PERF, "space": "viola"}, "table_not_full")
    await answer(eve, {"type": "take_seat", "id": "e-2", "name": "Zed"}, "seat_taken")
    await answer(eve, {"type": "play_again", "id": "e-3"}, "game_not_over")
    await answer(fay, {"type": "take_seat", "id": "f-1", "name": "Fay"}, "accepted")
    assert (await http.post(f"/games/{game_id}/seats/2/close", headers=host)).status_code == 200
    reissued = await http.post(f"/games/{game_id}/seats/1/token", headers=host)
    assert reissued.status_code == 200
    closed = await connect(url, game_id, "Gus again", token=tokens[2])
    played.peers.append(closed)
    await answer(closed, {"type": "place", "id": "g-1", "token": PERF, "space": "viola"}, "seat_closed")
    await answer(eve, {"type": "place", "id": "e-4", "token": PERF, "space": "viola"}, "accepted")
    await answer(eve, {"type": "end_game", "id": "e-5"}, "accepted")
    await answer(eve, {"type": "play_again", "id": "e-6"}, "accepted")
    await eve.until(lambda f: f["type"] == "next_game")
    return str(game_id)


@pytest.fixture(scope="module")
def api(start_module_server: Any) -> Any:
    return start_module_server(max_placements=MAX_PLACEMENTS)


@pytest.fixture(scope="module")
def schema(api: Any) -> dict[str, Any]:
    response = httpx.get(f"{api.url}/schema.json", timeout=10)
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


@pytest.fixture(scope="module")
def played(api: Any) -> Played:
    return asyncio.run(play(api.url))


def shape(frame: dict[str, Any]) -> str:
    """The definition a server frame should match."""
    if frame["type"] != "events":
        kinds = {"welcome": "Welcome", "accepted": "Accepted", "rejected": "RejectedFrame"}
        return {**kinds, "presence": "PresenceFrame", "next_game": "NextGameFrame"}[frame["type"]]
    return "EventsFrame" if "view" in frame else "DeltaFrame" if "view_delta" in frame else "HistoryFrame"


def everything(played: Played) -> list[tuple[str, Any]]:
    """Each value the game put on the wire, with the definitions it must match."""
    items: list[tuple[str, Any]] = []
    for frame in played.server_frames:
        items += [("ServerFrame", frame), (shape(frame), frame)]
    items += [("ClientFrame", frame) for frame in played.client_frames]
    items += [("Envelope", envelope) for envelope in played.envelopes]
    items += [("View", view) for view in played.views]
    return items


def broken(played: Played) -> list[tuple[str, Any]]:
    """Values the server never sends or accepts, each of which the schema must refuse."""
    frames = list(played.server_frames)
    delta = next(f for f in frames if shape(f) == "DeltaFrame")
    full = next(f for f in frames if shape(f) == "EventsFrame")
    accepted = next(f for f in frames if f["type"] == "accepted")
    welcome = next(f for f in frames if f["type"] == "welcome")
    rejected = next(f for f in frames if f["type"] == "rejected")
    envelope = played.envelopes[1]
    without = copy.deepcopy(envelope)
    del without["prev"]
    return [
        ("ServerFrame", {**delta, "view": full["view"]}),  # both a view and a delta
        (
            "ServerFrame",
            {**delta, "view_delta": {**delta["view_delta"], "added": {"viola": {"kind": "rare"}}}},
        ),
        ("ServerFrame", {**welcome, "view": {}}),
        ("ServerFrame", {**welcome, "seat": 4}),
        ("ServerFrame", {**accepted, "events": [{}]}),
        ("ServerFrame", {**accepted, "events": [{**envelope, "event": {"type": "ChairClaimed"}}]}),
        ("ServerFrame", {**rejected, "code": "nope"}),
        ("ServerFrame", {"type": "events"}),
        ("Envelope", without),
        ("Envelope", {**envelope, "version": "two"}),
        ("View", {**played.views[-1], "spaces": {"viola": {"kind": "standard"}}}),
        ("ClientFrame", {"type": "hello", "view": "bogus"}),
        ("ClientFrame", {"type": "hello", "seat": 0}),
        ("ClientFrame", {"type": "place", "id": "c-1", "token": {"kind": "spell"}, "space": "viola"}),
        ("ClientFrame", {"type": "place", "id": "c-1", "token": PERF, "space": "viola", "seat": 0}),
        ("ClientFrame", {"type": "end_game", "id": "two words"}),
    ]


def test_the_game_covers_every_frame_event_and_rejection_a_client_can_cause(played: Played) -> None:
    frames = list(played.server_frames)
    assert {shape(f) for f in frames} == {
        "Welcome",
        "Accepted",
        "RejectedFrame",
        "EventsFrame",
        "DeltaFrame",
        "HistoryFrame",
        "PresenceFrame",
        "NextGameFrame",
    }
    events = {(e["event"]["type"], e["event"].get("reason")) for e in played.envelopes}
    assert events == {
        ("GameCreated", None),
        ("ChairClaimed", None),
        ("ChairStolen", "majority"),
        ("ChairStolen", "instrument"),
        ("PlacedBelowLine", "no_majority"),
        ("PlacedBelowLine", "own_chair"),
        ("PlacedBelowLine", "instrument_holds"),
        ("PlacementTakenBack", None),
        ("GameEnded", None),
        ("SeatTaken", None),
        ("SeatClosed", None),
        ("SeatTokenReissued", None),
        ("NextGame", None),
    }, "a new kind of event or reason: have this game make one"
    # Every kind of client frame was sent, and every code a client can cause came back: all but the
    # store's (unavailable, store_full, damaged_game, archiving: an operator's doing, tested on their own),
    # and those of commands the wire does not carry yet.
    tags = {frame.__struct_config__.tag for frame in get_args(ClientFrame)}
    assert {f["type"] for f in played.client_frames} == tags, "a new client frame: have this game send one"
    not_on_the_wire = set() if "take_back" in tags else {"cannot_take_back"}
    store = {"unavailable", "store_full", "damaged_game", "archiving", "history_lost"}
    # Closing a seat is the host's, over HTTP (game_started); next_game_exists is answered with the game.
    not_on_the_wire |= {"game_started", "next_game_exists"}
    assert set(played.codes) == set(CODES) - store - not_on_the_wire
    history = [f for f in frames if shape(f) == "HistoryFrame"]
    assert (
        sum(len(f["envelopes"]) for f in history) > 12
    )  # the live `view: false` frames and the late history


def test_every_value_of_a_real_game_validates_with_python_jsonschema(schema: Any, played: Played) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    root = jsonschema.Draft202012Validator(schema)
    validators = {name: python_validator(schema, name) for name in schema["$defs"]}
    for name, value in everything(played):
        validators[name].validate(value)
        if name in ("ClientFrame", "ServerFrame"):
            root.validate(value)
    for name, value in broken(played):
        assert not validators[name].is_valid(value), (name, value)


def test_every_value_of_a_real_game_validates_with_ajv_in_strict_mode(
    schema: Any, played: Played, tmp_path: Path
) -> None:
    items = everything(played)
    results = ajv(schema, items, tmp_path)
    failures = [
        (name, value, r["errors"]) for (name, value), r in zip(items, results, strict=True) if not r["valid"]
    ]
    assert failures == []
    wrong = broken(played)
    # ECMA-262's `$` ends the string, as the server means it: an id with a final line break is refused.
    wrong.append(("ClientFrame", {"type": "end_game", "id": "c-1\n"}))
    results = ajv(schema, wrong, tmp_path)
    assert [r["valid"] for r in results] == [False] * len(wrong), [
        item for item, r in zip(wrong, results, strict=True) if r["valid"]
    ]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(
            lambda defs: defs["Token"].update(discriminator={"propertyName": "kind"}), id="discriminator"
        ),
        pytest.param(
            lambda defs: defs["PlaceFrame"]["properties"]["id"].update(pattern=r"^a\Z"), id="python-anchor"
        ),
        pytest.param(
            lambda defs: defs["Welcome"]["properties"].update(seat={"minimum": 0}), id="untyped-minimum"
        ),
    ],
)
def test_ajv_in_strict_mode_refuses_a_schema_that_is_not_portable(
    schema: Any, damage: Any, tmp_path: Path
) -> None:
    """What the checker would say of a schema that slipped: it does not compile (exit 2)."""
    node = node_or_skip()
    damaged = copy.deepcopy(schema)
    damage(damaged["$defs"])
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(damaged))
    done = run_checker(node, path, [])
    assert done.returncode == 2 and "does not compile" in done.stderr, done.stderr


def test_closing_codes_of_refused_hellos(played: Played) -> None:
    by_name = {peer.name: peer for peer in played.peers}
    for name, code in (("lost", "unknown_game"), ("stranger", "forbidden"), ("bogus", "bad_request")):
        peer = by_name[name]
        assert [(f["type"], f["code"]) for f in peer.received] == [("rejected", code)], name
        assert peer.close_code == 1008
    assert by_name["bogus"].received[0]["message"] == "Invalid enum value 'bogus' - at `$.view`"
