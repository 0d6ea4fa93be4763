"""A real game over real websockets: players, spectators, views, rejections, retries and resumes."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from orchestra_client import GameClient, apply_delta, create_game, get_events, get_view
from tests.support.e2e import new_game
from tests.support.servers import ServerProcess
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

PERF = {"kind": "performance", "era": "classical"}
REPAIR = {"kind": "repair", "family": "strings"}
STRINGS = {"kind": "repair", "family": "strings"}
RARE_WINDS = {"kind": "instrument", "instrument": "rare_winds"}


async def test_a_three_player_game_reaches_two_spectators_once_in_order_with_the_http_view(
    server: Any,
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben", "Cy"])
    ada, ben, cy = [await GameClient.connect(server.url, game_id, t) for t in tokens]
    watchers = [await GameClient.connect(server.url, game_id) for _ in range(2)]
    script: list[tuple[GameClient, dict[str, Any]]] = [
        (ada, {"token": PERF, "space": "viola"}),
        (ben, {"token": STRINGS, "space": "viola"}),
        (ben, {"token": PERF, "space": "viola", "consolation": "inspiration"}),
        (ada, {"token": STRINGS, "space": "viola"}),
        (cy, {"token": {"kind": "instrument", "instrument": "viola"}, "space": "viola", "skill": 6}),
        (ben, {"token": PERF, "space": "viola"}),
        (
            cy,
            {
                "token": {"kind": "instrument", "instrument": "rare_strings"},
                "space": "rare_strings",
                "materials": ["wood"],
            },
        ),
    ]
    for client, fields in script:
        answer = await client.place(**fields)
        assert answer["type"] == "accepted", answer
        for watcher in watchers:
            await watcher.wait_for_version(answer["version"])
            assert watcher.view == await get_view(server.url, game_id)
    ended = await ada.end_game()
    assert ended["type"] == "accepted"
    stream = await get_events(server.url, game_id)
    for watcher in watchers:
        await watcher.wait_for_version(ended["version"])
        assert [e["version"] for e in watcher.envelopes] == list(range(2, ended["version"] + 1))
        assert watcher.envelopes == stream[1:]
        assert watcher.view is not None and watcher.view["ended"] is True
    kinds = [e["event"]["type"] for e in stream]
    assert kinds == [
        "GameCreated",
        "ChairClaimed",
        "PlacedBelowLine",
        "ChairStolen",
        "PlacedBelowLine",
        "ChairStolen",
        "PlacedBelowLine",
        "ChairClaimed",
        "GameEnded",
    ]
    assert stream[5]["event"]["bonus"] == {"money": 8}  # the skill-6 Viola instrument doubles
    final = stream[-1]["event"]
    assert [r["seat"] for r in final["ranking"]] == [2, 0, 1]
    assert watchers[0].view is not None and final["scores"] == watchers[0].view["scores"]
    for client in (ada, ben, cy, *watchers):
        await client.close()


async def test_every_envelope_carries_the_hash_chain_and_the_seat_of_its_command(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    async with await GameClient.connect(server.url, game_id, tokens[1]) as ben:
        await ben.place(PERF, "viola")
    stream = await get_events(server.url, game_id)
    assert stream[0]["seat"] is None and stream[0]["command_id"].startswith("create:")
    assert stream[1]["seat"] == 1 and stream[1]["schema"] == 1
    import hashlib

    async with httpx.AsyncClient(base_url=server.url) as http:
        lines = (await http.get(f"/games/{game_id}/events")).content.splitlines()
    # The chain hashes what the proof covers: the line without its proof (protocol.md, section 7).
    body = lines[0][: lines[0].rindex(b',"proof":')] + b"}"
    assert stream[1]["prev"] == hashlib.sha256(body).hexdigest()


async def test_a_repeated_command_id_is_applied_once_even_across_a_reconnect(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    first = await ada.place(PERF, "viola", id="same-id")
    again = await ada.place(PERF, "viola", id="same-id")
    assert first == again
    await ada.close()
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    # Even with another body, and after the game moved on, the id wins: the first answer comes back.
    await ada.place(STRINGS, "lute")
    after_reconnect = await ada.place(STRINGS, "cello", id="same-id")
    assert after_reconnect == first
    stream = await get_events(server.url, game_id)
    assert [e["command_id"] for e in stream].count("same-id") == 1
    await ada.end_game()
    after_end = await ada.place(PERF, "viola", id="same-id")
    assert after_end == first
    await ada.close()


async def test_the_same_id_from_another_seat_is_another_command(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    ben = await GameClient.connect(server.url, game_id, tokens[1])
    a = await ada.place(PERF, "viola", id="x1")
    b = await ben.place(PERF, "lute".replace("lute", "clarinet"), id="x1")
    assert a["type"] == b["type"] == "accepted" and a["version"] != b["version"]
    await ada.close()
    await ben.close()


async def test_a_client_resuming_with_since_gets_every_missed_envelope_once(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    watcher = await GameClient.connect(server.url, game_id)
    await ada.place(PERF, "viola")
    await watcher.wait_for_version(2)

    async def keep_playing(spaces: tuple[str, ...]) -> None:
        for space in spaces:
            era = {"lute": "baroque", "violin_bc": "baroque", "oboe": "baroque"}.get(space, "romantic")
            if space in ("clarinet", "timpani"):
                era = "classical"
            answer = await ada.place({"kind": "performance", "era": era}, space)
            assert answer["type"] == "accepted", answer

    await keep_playing(("lute", "violin_bc", "cello", "oboe"))
    await watcher.wait_for_version(6)
    # The network cuts the spectator off mid-game, and play goes on; it resumes by itself.
    await watcher.drop()
    await keep_playing(("clarinet", "flute", "piano", "timpani"))
    await watcher.wait_for_version(10)
    assert watcher.reconnects >= 1
    versions = [e["version"] for e in watcher.envelopes]
    assert versions == list(range(2, 11)), versions
    assert watcher.view == await get_view(server.url, game_id)
    await ada.close()
    await watcher.close()


async def test_a_hello_with_since_replays_history_before_live_traffic(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    for space in ("viola", "clarinet", "timpani"):
        await ada.place(PERF, space)
    late = await GameClient.connect(server.url, game_id, since=2)
    assert late.welcome["version"] == 4
    await late.wait_for_version(4)
    history = [f for f in late.received if f["type"] == "events"]
    assert all(set(f) == {"type", "envelopes"} for f in history)
    assert [e["version"] for e in late.envelopes] == [3, 4]
    await ada.place(PERF, "violin_bc")
    await late.wait_for_version(5)
    assert [e["version"] for e in late.envelopes] == [3, 4, 5]
    assert "view_delta" in late.received[-1]  # live traffic, with the default view mode
    assert late.view == await get_view(server.url, game_id)
    await ada.close()
    await late.close()


async def test_a_since_past_the_version_is_rejected_and_treated_as_the_version(server: Any) -> None:
    game_id, _ = await new_game(server.url, ["Ada"])
    watcher = await GameClient.connect(server.url, game_id, since=99)
    frame = await watcher.next_frame()
    assert frame["type"] == "rejected" and frame["code"] == "bad_request" and frame["id"] is None
    assert watcher.welcome["version"] == 1
    await watcher.close()


async def test_clients_asking_for_no_view_get_frames_without_it(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    tool = await GameClient.connect(server.url, game_id, view=False)
    await ada.place(PERF, "viola")
    frame = await tool.next_frame()
    assert frame["type"] == "events" and "view" not in frame and frame["envelopes"][0]["version"] == 2
    await ada.close()
    await tool.close()


async def test_two_server_processes_share_one_history_and_decide_racing_commands(start_server: Any) -> None:
    one, two = start_server(), start_server()
    game_id, tokens = await new_game(one.url, ["Ada", "Ben", "Cy"])
    ada = await GameClient.connect(one.url, game_id, tokens[0])
    ben = await GameClient.connect(two.url, game_id, tokens[1])
    watcher_one = await GameClient.connect(one.url, game_id)
    watcher_two = await GameClient.connect(two.url, game_id)

    async def race(client: GameClient, count: int) -> list[dict[str, Any]]:
        return [await client.place(PERF, "viola") for _ in range(count)]

    answers = await asyncio.gather(race(ada, 15), race(ben, 15))
    assert all(a["type"] == "accepted" for side in answers for a in side), answers
    versions = sorted(a["version"] for side in answers for a in side)
    assert versions == list(range(2, 32))
    for watcher in (watcher_one, watcher_two):
        await watcher.wait_for_version(31)
    assert watcher_one.envelopes == watcher_two.envelopes == (await get_events(one.url, game_id))[1:]
    assert watcher_one.view == watcher_two.view == await get_view(two.url, game_id)
    for client in (ada, ben, watcher_one, watcher_two):
        await client.close()


async def test_create_game_answers_tokens_once_and_http_reads_need_no_token_for_public_games(
    server: Any,
) -> None:
    created = await create_game(server.url, ["Ada", "Ben"])
    assert created["version"] == 1 and [s["seat"] for s in created["seats"]] == [0, 1]
    assert len({s["token"] for s in created["seats"]}) == 2 and "watch_token" not in created
    view = await get_view(server.url, created["game_id"])
    assert created["seats"][0]["token"] not in str(view)
    assert view["players"] == [{"seat": 0, "name": "Ada"}, {"seat": 1, "name": "Ben"}]
    assert len(view["spaces"]) == 14


async def test_delta_clients_keep_the_same_view_as_a_full_view_client_at_every_frame(
    start_server: Any,
) -> None:
    # Two nodes, so that deltas reach followers both from their own node's appends and from the other
    # node's (through the tail), in batches of one or several commands.
    one, two = start_server(), start_server()
    game_id, tokens = await new_game(one.url, ["Ada", "Ben", "Cy"])
    players = [
        await GameClient.connect(node.url, game_id, token)
        for node, token in zip((one, two, one), tokens, strict=True)
    ]
    # None: a hello without `view` (deltas, the default); True: v1's spelling of "full".
    modes: tuple[str | bool | None, ...] = ("full", True, None, "delta")
    followers = {
        (node.url, mode): await GameClient.connect(node.url, game_id, view=mode)
        for node in (one, two)
        for mode in modes
    }
    rng = random.Random(7)
    moves = [
        (PERF, "viola"),
        (REPAIR, "viola"),
        (REPAIR, "cello"),
        (PERF, "oboe"),
        (PERF, "piano"),
        (RARE_WINDS, "rare_winds"),
    ]

    async def play(client: GameClient, count: int) -> None:
        for _ in range(count):
            token, space = rng.choice(moves)
            await client.place(token, space)

    await asyncio.gather(*(play(client, 12) for client in players))
    last = (await get_events(one.url, game_id))[-1]["version"]
    for follower in followers.values():
        await follower.wait_for_version(last)
    final = await get_view(one.url, game_id)
    for (url, mode), follower in followers.items():
        assert follower.view == final, (url, mode)
        kinds = {
            frozenset({"view", "view_delta"} & set(f)) for f in follower.received if f.get("type") == "events"
        }
        assert kinds == {frozenset({"view" if mode in ("full", True) else "view_delta"})}, mode
    # Frame by frame: applying each delta gives the view of the full-view follower of the same node.
    for node, mode in itertools.product((one, two), (None, "delta")):
        full = [f for f in followers[(node.url, "full")].received if f.get("type") == "events"]
        partial = [f for f in followers[(node.url, mode)].received if f.get("type") == "events"]
        view = followers[(node.url, mode)].welcome["view"]
        by_version = {f["envelopes"][-1]["version"]: f["view"] for f in full}
        for frame in partial:
            view = apply_delta(view, frame["view_delta"])
            version = frame["envelopes"][-1]["version"]
            assert view["version"] == version
            if version in by_version:
                assert view == by_version[version]
            else:  # batched differently on this connection: compare with the view at that version
                assert view == await get_view(node.url, game_id, at=version)
        deltas = [f["view_delta"] for f in partial]
        assert all(not delta["spaces"] for delta in deltas)  # placements only add: no space comes whole
        for frame, delta in zip(partial, deltas, strict=True):
            if len(frame["envelopes"]) == 1:  # one placement: one space, and one or two seats' scores
                assert len(delta["added"]) == 1 and 1 <= len(delta["score_changes"]) <= 2
            for change in delta["score_changes"]:
                assert set(change) == {"seat", "prestige", "resources", "held"}
    for client in [*players, *followers.values()]:
        await client.close()


async def test_a_delta_after_the_game_ends_carries_ended_and_nothing_else(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    watcher = await GameClient.connect(server.url, game_id)
    await ada.place(PERF, "viola")
    first = (await watcher.next_frame())["view_delta"]
    # What the space gained (the chair, nothing below the line yet), and the seat's new score.
    assert first == {
        "version": 2,
        "ended": False,
        "spaces": {},
        "added": {
            "viola": {"kind": "standard", "chair": {"seat": 0, "token": PERF}, "below_from": 0, "below": []}
        },
        "score_changes": [{"seat": 0, "prestige": 3, "resources": {"money": 4}, "held": {"viola": 1}}],
    }
    await ada.end_game()
    ended = (await watcher.next_frame())["view_delta"]
    assert ended == {"version": 3, "ended": True, "spaces": {}, "added": {}, "score_changes": []}
    assert watcher.view == await get_view(server.url, game_id)
    await ada.close()
    await watcher.close()


async def test_a_delta_client_whose_view_went_wrong_starts_again_from_a_welcome(server: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    watcher = await GameClient.connect(server.url, game_id, view="delta")
    for _ in range(3):
        await ada.place(PERF, "viola")
    await watcher.wait_for_version(4)
    assert watcher.view == await get_view(server.url, game_id) and watcher.reconnects == 0
    assert watcher.view is not None
    watcher.view["spaces"]["viola"]["below"].pop()  # as a lost frame would leave it
    await ada.place(PERF, "viola")
    await until(lambda: watcher.reconnects > 0 and watcher.view is not None, 10, "the client started again")
    assert watcher.view == await get_view(server.url, game_id)
    await ada.place(PERF, "viola")  # and it follows on with deltas
    await watcher.wait_for_version(6)
    assert watcher.view == await get_view(server.url, game_id) and watcher.reconnects == 1
    await ada.close()
    await watcher.close()


async def test_a_command_sent_while_the_connection_is_down_is_bounded_by_its_timeout(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server()
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    ada = await GameClient.connect(server.url, game_id, tokens[0])
    try:
        server.stop()  # the client keeps trying to come back, for longer than the command may wait
        # Sent while a reconnect is under way (the session has no public sign of it but this one).
        await until(lambda: not ada._connected.is_set(), 10, "the client trying to reconnect")
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await ada.send({"type": "place", "token": PERF, "space": "viola"}, timeout=1.0)
        assert time.monotonic() - started < 5, "the send waited for the connection past its timeout"
    finally:
        await ada.close()
