"""The demo bots over the real protocol, and `orchestra demo` as a user runs it (no browser needed)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestra_client import get_events, get_view
from orchestra_client.bots import TOLERATED
from tests.support.browser import PLAYERS, check_legal_history, new_game, play_bots
from tests.support.servers import ROOT, ServerProcess

pytestmark = pytest.mark.e2e


async def test_three_bots_play_a_whole_legal_game(server: ServerProcess) -> None:
    game_id, tokens = await new_game(server.url)
    results = await play_bots(server.url, game_id, tokens, pace=(0.0, 0.01), placements=15, seed=21)

    assert results[0].ended_game and all(r.game_over or r.placed == 15 for r in results)
    assert all(set(result.rejections) <= TOLERATED | {"game_over"} for result in results)
    assert results[0].placed == 15
    envelopes = await get_events(server.url, game_id)
    assert envelopes[-1]["event"]["type"] == "GameEnded"
    placements = [env for env in envelopes if env["event"]["type"] not in ("GameCreated", "GameEnded")]
    assert len(placements) == sum(result.placed for result in results)
    assert {env["seat"] for env in placements} == {0, 1, 2}
    kinds = {env["event"]["token"]["kind"] for env in placements}
    assert kinds == {"instrument", "performance", "repair"}
    state = check_legal_history(envelopes)
    assert state.ended
    assert (await get_view(server.url, game_id))["ended"]


async def test_a_bot_stops_when_the_game_ends_under_it(server: ServerProcess) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    results = await play_bots(server.url, game_id, tokens, pace=(0.0, 0.01), placements=2, seed=3)
    assert results[0].ended_game
    # Ben's bot, given a larger quota, meets the ended game and stops without error.
    more = await play_bots(server.url, game_id, tokens[1:], pace=(0.0, 0.0), placements=50, seed=4)
    assert more[0].game_over and more[0].placed == 0


def test_orchestra_demo_plays_a_game_to_its_end(
    start_server: Callable[..., ServerProcess], redis_url: str, tmp_path: Path
) -> None:
    demo = subprocess.run(
        [sys.executable, "-m", "server.ops.cli", "demo", "--port", "0", "--redis-url", redis_url]
        + ["--pace", "0.01", "0.03", "--placements", "6", "--seed", "2", "--exit-when-done"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    watch = next(line for line in demo.stdout.splitlines() if "watch:" in line).split()[-1]
    assert watch.endswith("/watch") and "The game is over" in demo.stdout
    game_id = watch.rsplit("/", 2)[1]

    # The game is in the store: a fresh server on the same Redis shows it ended, with a legal history.
    reader = start_server()
    envelopes = asyncio.run(get_events(reader.url, game_id))
    assert envelopes[0]["event"]["players"] == PLAYERS
    assert envelopes[-1]["event"]["type"] == "GameEnded"
    check_legal_history(envelopes)
