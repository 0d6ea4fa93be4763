"""A small Python client for the Orchestra server, used by tests, bots, benchmarks and replay tools.

    async with await GameClient.connect("http://127.0.0.1:8000", game_id, token=seat_token) as game:
        answer = await game.place({"kind": "performance", "era": "classical"}, "viola")
        async for frame in game.frames():   # live `events` frames, in order
            ...

It speaks protocol v1: hello (with `since` to resume), commands answered by id, `events` frames. When the
connection drops (not when the server refuses it), it reconnects by itself with `since` set to the last
version it saw and re-sends unanswered commands with their ids, which the server answers once.
"""

from client.http import create_game, get_events, get_view
from client.session import Answer, ConnectionRefused, GameClient

__all__ = ["Answer", "ConnectionRefused", "GameClient", "create_game", "get_events", "get_view"]
