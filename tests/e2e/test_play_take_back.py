"""Taking back a placement on a real server: players, spectators following deltas and whole views, the
view at every version over HTTP, `orchestra verify`, and every way a take-back is refused."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestra_client import GameClient, get_events, get_view
from tests.support.e2e import expect_accepted, new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
PERF = {"kind": "performance", "era": "classical"}
STRINGS = {"kind": "repair", "family": "strings"}
VIOLA = {"kind": "instrument", "instrument": "viola"}
RARE_STRINGS = {"kind": "instrument", "instrument": "rare_strings"}


@pytest.fixture(scope="module")
def server(start_module_server: Any) -> Any:
    return start_module_server()


def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.ops.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


async def test_spectators_views_follow_each_take_back_and_equal_the_view_over_http_at_every_version(
    server: Any,
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben", "Cy"])
    ada, ben, cy = [await GameClient.connect(server.url, game_id, token) for token in tokens]
    deltas, whole = (
        await GameClient.connect(server.url, game_id),
        await GameClient.connect(server.url, game_id, view="full"),
    )
    seen: dict[int, Any] = {1: await get_view(server.url, game_id)}
    script: list[tuple[GameClient, str, dict[str, Any]]] = [
        (ada, "place", {"token": PERF, "space": "viola"}),  # claims the chair
        (ada, "take_back", {}),  # the chair is empty again
        (ada, "place", {"token": PERF, "space": "viola"}),
        (ben, "place", {"token": STRINGS, "space": "viola"}),  # below the line
        (ben, "place", {"token": PERF, "space": "viola"}),  # steals by majority
        (ben, "take_back", {}),  # Ada holds the chair again, her token leaves the line
        (cy, "place", {"token": VIOLA, "space": "viola", "skill": 6}),  # an instrument takes the chair
        (cy, "take_back", {"expected_version": 8}),
        (cy, "place", {"token": RARE_STRINGS, "space": "rare_strings", "materials": ["wood"]}),
        (cy, "take_back", {}),  # a rare chair leaves
        (ben, "place", {"token": PERF, "space": "violin_bc"}),
    ]
    for client, kind, fields in script:
        if kind == "place":
            answer = expect_accepted(await client.place(**fields))
        else:
            answer = expect_accepted(await client.take_back(**fields))
            (envelope,) = answer["events"]
            assert envelope["event"] == {
                "type": "PlacementTakenBack",
                "seat": client.seat,
                "version": answer["version"] - 1,
            }
            assert envelope["seat"] == client.seat
        version = answer["version"]
        http = await get_view(server.url, game_id)
        for spectator in (deltas, whole):
            await spectator.wait_for_version(version)
            assert spectator.view == http, (kind, version)
        seen[version] = http
        if kind == "take_back":
            # The view is the one before the placement: only the version goes on.
            assert http == {**seen[version - 2], "version": version}
    assert deltas.reconnects == 0 and whole.reconnects == 0  # no delta failed to apply
    # The take-back's delta frame names where the Viola's list is cut and carries none of its tokens.
    frames = [f for f in deltas.received if f["type"] == "events" and "view_delta" in f]
    undo_steal = next(f for f in frames if f["envelopes"][-1]["version"] == 7)
    assert undo_steal["view_delta"]["added"] == {
        "viola": {"kind": "standard", "chair": {"seat": 0, "token": PERF}, "below_from": 1, "below": []}
    }
    assert {c["seat"]: c["held"] for c in undo_steal["view_delta"]["score_changes"]} == {
        0: {"viola": 1},
        1: {"viola": 0},
    }
    # ?at=N is the view each spectator held at N, for every version.
    async with httpx.AsyncClient(base_url=server.url) as http_client:
        for version, view in seen.items():
            response = await http_client.get(f"/games/{game_id}", params={"at": version})
            assert response.status_code == 200 and response.json() == view, version
    # A spectator that comes later, resuming from the start, reads who took what back in the history.
    late = await GameClient.connect(server.url, game_id, since=1)
    await late.wait_for_version(max(seen))
    assert late.envelopes == (await get_events(server.url, game_id))[1:]
    assert [e["seat"] for e in late.envelopes if e["event"]["type"] == "PlacementTakenBack"] == [0, 1, 2, 2]
    assert late.view == seen[max(seen)]
    verified = await asyncio.to_thread(orchestra, "verify", game_id, "--server", server.url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "live view matches" in verified.stdout
    for client in (ada, ben, cy, deltas, whole, late):
        await client.close()


async def test_a_take_back_is_refused_as_protocol_md_says(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    ada, ben = [await GameClient.connect(server.url, game_id, token) for token in tokens]
    spectator = await GameClient.connect(server.url, game_id)
    nothing = await ada.take_back(id="t-0")
    assert (nothing["type"], nothing["code"], nothing["id"], nothing["version"]) == (
        "rejected",
        "cannot_take_back",
        "t-0",
        1,
    )
    expect_accepted(await ada.place(PERF, "viola"))
    theirs = await ben.take_back(id="t-1")
    assert theirs["code"] == "cannot_take_back"
    assert theirs["message"] == (
        "the game's last placement (version 2) is seat 0's: only your own placement can be taken back"
    )
    assert (await spectator.take_back(id="t-2"))["code"] == "forbidden"
    assert (await ada.send({"type": "take_back", "id": "t-3", "seat": 0}))["code"] == "bad_request"
    assert (await ada.take_back(id="t-4", expected_version=1))["code"] == "stale_version"
    first = expect_accepted(await ada.take_back(id="t-5"))
    assert (await ada.take_back(id="t-6"))["code"] == "cannot_take_back"  # a take-back is not taken back
    # The id of an accepted take-back: its first answer, nothing appended.
    assert await ada.take_back(id="t-5") == first
    expect_accepted(await ben.place(PERF, "viola"))
    expect_accepted(await ada.end_game())
    assert (await ben.take_back(id="t-7"))["code"] == "game_over"
    stream = await get_events(server.url, game_id)
    assert [e["event"]["type"] for e in stream] == [
        "GameCreated",
        "ChairClaimed",
        "PlacementTakenBack",
        "ChairClaimed",
        "GameEnded",
    ]
    for client in (ada, ben, spectator):
        await client.close()


async def test_a_take_back_counts_toward_the_placement_limit(start_server: Any) -> None:
    limited = start_server(max_placements=3)
    game_id, tokens = await new_game(limited.url, ["Ada"])
    async with await GameClient.connect(limited.url, game_id, tokens[0]) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
        expect_accepted(await ada.take_back())
        expect_accepted(await ada.place(STRINGS, "viola"))
        refused = await ada.take_back()
        assert refused["code"] == "limit_reached" and refused["version"] == 4
        assert (await ada.place(PERF, "viola"))["code"] == "limit_reached"
        expect_accepted(await ada.end_game())


async def test_the_python_client_knows_when_a_take_back_may_be_offered_and_answers_with_the_view_current(
    server: Any,
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    ada, ben = [await GameClient.connect(server.url, game_id, token) for token in tokens]
    watcher = await GameClient.connect(server.url, game_id)
    try:
        assert ada.last_placement is None and watcher.last_placement is None
        answer = expect_accepted(await ada.place(PERF, "viola"))
        # Returned once its events frame is in: the view and version already hold the placement.
        assert ada.version == answer["version"] and ada.view is not None
        assert ada.view["spaces"]["viola"]["chair"]["seat"] == 0
        assert ada.last_placement is not None and ada.last_placement["version"] == answer["version"]
        await ben.wait_for_version(answer["version"])
        assert ben.last_placement is None  # not Ben's
        answer = expect_accepted(await ben.place(STRINGS, "viola"))
        await ada.wait_for_version(answer["version"])
        assert ada.last_placement is None and ben.last_placement is not None
        expect_accepted(await ben.take_back())
        assert ben.last_placement is None  # the last envelope is the take-back
        await watcher.wait_for_version(answer["version"] + 1)
        assert watcher.last_placement is None  # a spectator never takes back
    finally:
        for client in (ada, ben, watcher):
            await client.close()
