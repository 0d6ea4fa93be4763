"""Small helpers shared by the end-to-end tests."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import ClientConnection

from orchestra_client import GameClient, create_game
from tests.support.waiting import eventually

__all__ = ["eventually"]  # its old home: tests import it from here too

PERF = {"kind": "performance", "era": "classical"}
STRINGS = {"kind": "repair", "family": "strings"}
REJECTION_KEYS = {"type", "id", "code", "message", "version"}


async def new_game(url: str, players: list[str], **options: Any) -> tuple[str, list[str]]:
    """Create a game; its id and the seat tokens in seat order."""
    created = await create_game(url, players, **options)
    return created["game_id"], [seat["token"] for seat in created["seats"]]


def expect_accepted(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer, which must be `accepted` (else the assertion shows it)."""
    assert answer["type"] == "accepted", answer
    return answer


async def end_game(url: str, game_id: str, token: str) -> None:
    """End a game as the seat whose `token` is given, on a connection of its own."""
    async with await GameClient.connect(url, game_id, token, reconnect=False) as player:
        expect_accepted(await player.end_game())


async def next_answer(client: GameClient, timeout: float = 5.0) -> dict[str, Any]:
    """The next `accepted` or `rejected` frame that `send` did not claim (live `events` are skipped)."""

    async def wait() -> dict[str, Any]:
        while True:
            frame = await client.next_frame(timeout)
            if frame["type"] in ("accepted", "rejected"):
                return frame

    return await asyncio.wait_for(wait(), timeout)


def log_lines(logs: str) -> list[dict[str, Any]]:
    """Every whole line of a server log, parsed (each must be one JSON object); a last line the server is
    still writing (no newline yet) is left for a later read."""
    whole = logs[: logs.rfind("\n") + 1]
    lines = [json.loads(line) for line in whole.splitlines() if line.strip()]
    assert all(isinstance(line, dict) for line in lines)
    return lines


def assert_clean_logs(logs: str) -> None:
    """No traceback and no error-level line in a server's log."""
    assert "Traceback" not in logs
    errors = [line for line in log_lines(logs) if line.get("level") in ("error", "critical")]
    assert errors == []


async def stalled_spectator(url: str, game_id: str, close_timeout: float = 10) -> ClientConnection:
    """A spectator of whole views with a tiny receive buffer and no compression (views compress very well),
    welcomed, that then stops reading: the server's frames pile up in the socket's buffers, then in its
    queue. `transport.resume_reading()` reads again."""
    parts = urlsplit(url)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect((parts.hostname, parts.port))
    ws_url = url.replace("http://", "ws://") + f"/games/{game_id}/ws"
    slow = await websockets.connect(
        ws_url, sock=raw, max_queue=1, compression=None, open_timeout=5, close_timeout=close_timeout
    )
    try:
        await slow.send(json.dumps({"type": "hello", "token": None, "since": None, "view": "full"}))
        assert json.loads(await asyncio.wait_for(slow.recv(), 5))["type"] == "welcome"
    except BaseException:
        await slow.close()
        raise
    slow.transport.pause_reading()
    return slow
