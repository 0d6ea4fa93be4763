"""The game of `orchestra demo`: three bots (Ada, Ben, Cy) play one game on a running server, its links said.

    results = await play_demo("http://127.0.0.1:8000", DemoOptions(placements=12), say=print)

The server's command line starts the server and hands its address here; this side is a client of the
protocol like any other (it creates the game over HTTP, the bots play over websockets), so the server's
packages never import the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from orchestra_client.bots import BotResult, play_bot
from orchestra_client.http import create_game

PLAYERS = ["Ada", "Ben", "Cy"]


@dataclass(frozen=True)
class DemoOptions:
    """How the bots play: their pace (seconds between placements), placements per bot, random seed."""

    pace: tuple[float, float] = (0.5, 1.5)
    placements: int = 12
    seed: int | None = None


async def play_demo(base: str, options: DemoOptions, say: Callable[[str], None]) -> list[BotResult]:
    """Create the bots' game at `base`, `say` its links, let the bots play it to its end, and say so.

    Raises what a bot raises (see `play_bot`), and httpx errors when the game cannot be created.
    """
    created = await create_game(base, PLAYERS)
    game_id = created["game_id"]
    say(f"Orchestra demo running at {base}/")
    say(f"  watch:  {base}/games/{game_id}/watch")
    say(f"  replay: {base}/games/{game_id}/replay")
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
    results = list(await asyncio.gather(*bots))
    placed = sum(result.placed for result in results)
    say(f"The game is over after {placed} placements: {base}/games/{game_id}/replay")
    return results
