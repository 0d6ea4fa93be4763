"""`orchestra demo`: a server in this process, a game of three bots (Ada, Ben, Cy), and its watch link.

The bots play random legal placements at a human pace over the real protocol (client.bots); the server
keeps serving after the game ends, so the game can be replayed, until Ctrl-C (or at once with
`exit_when_done`, for tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from orchestra_client import create_game
from orchestra_client.bots import BotResult, play_bot
from server.config import Settings
from server.ops.runner import started_url, uvicorn_server

PLAYERS = ["Ada", "Ben", "Cy"]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoOptions:
    """How the demo runs: bot pace (seconds between placements), placements per bot, random seed."""

    pace: tuple[float, float] = (0.5, 1.5)
    placements: int = 12
    seed: int | None = None
    exit_when_done: bool = False


async def run_demo(settings: Settings, options: DemoOptions) -> list[BotResult]:
    """Serve, create the bots' game, print its links, let the bots play it, then serve on until stopped."""
    server = uvicorn_server(settings, graceful_seconds=2)
    serving = asyncio.create_task(server.serve())
    results: list[BotResult] = []
    try:
        base = await started_url(server, serving)
        if base is None:
            return results
        created = await create_game(base, PLAYERS)
        game_id = created["game_id"]
        print(f"Orchestra demo running at {base}/", flush=True)
        print(f"  watch:  {base}/games/{game_id}/watch", flush=True)
        print(f"  replay: {base}/games/{game_id}/replay", flush=True)
        seed = options.seed
        bots = [
            play_bot(
                base,
                game_id,
                seat["token"],
                pace=options.pace,
                rng_seed=None if seed is None else seed + index,
                max_placements=options.placements,
            )
            for index, seat in enumerate(created["seats"])
        ]
        playing = asyncio.ensure_future(asyncio.gather(*bots))
        either: list[asyncio.Future[Any]] = [playing, serving]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not playing.done():  # the server was stopped (Ctrl-C) before the game ended
            playing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await playing
            return results
        results = list(playing.result())
        placed = sum(result.placed for result in results)
        print(f"The game is over after {placed} placements: {base}/games/{game_id}/replay", flush=True)
        if options.exit_when_done:
            server.should_exit = True
        else:
            print("Still serving; press Ctrl-C to stop.", flush=True)
        await serving
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    return results
