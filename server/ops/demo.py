"""`orchestra demo`: a server in this process, and a game played on it by the client's demo bots.

The bots are the Python client's (`orchestra_client.demo`), which the command line loads when the demo
runs: the server's packages import no client. The server keeps serving after the game ends, so the game can
be replayed, until Ctrl-C (or at once with `exit_when_done`, for tests).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from server.config import Settings
from server.ops.runner import started_url, uvicorn_server

# Given the server's base URL once it listens: plays the demo's game on it.
Play = Callable[[str], Coroutine[Any, Any, object]]


async def run_demo(settings: Settings, play: Play, exit_when_done: bool = False) -> bool:
    """Serve, run `play` against this server, then serve on until stopped (or stop, `exit_when_done`).

    Returns whether the game was played to its end (not when the server stopped first). Raises what
    `play` raises.
    """
    server = uvicorn_server(settings, graceful_seconds=2)
    serving = asyncio.create_task(server.serve())
    try:
        base = await started_url(server, serving)
        if base is None:
            return False
        playing = asyncio.ensure_future(play(base))
        either: list[asyncio.Future[Any]] = [playing, serving]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not playing.done():  # the server was stopped (Ctrl-C) before the game ended
            playing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await playing
            return False
        playing.result()
        if exit_when_done:
            server.should_exit = True
        else:
            print("Still serving; press Ctrl-C to stop.", flush=True)
        await serving
        return True
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving
