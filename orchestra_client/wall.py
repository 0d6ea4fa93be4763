"""The wall feed (`/wall/ws`): the public games on the server's wall, a page at a time, kept current from
its changes.

    async with await WallClient.connect("http://127.0.0.1:8000") as wall:
        print(list(wall.games), wall.total)     # the first page (the most active), and how many in all
        await wall.more()                       # another page: its `wall_page` frame adds to `games`
        frame = await wall.next_frame()         # each frame after the first (already applied), in order

After a drop, 1012 or 1013 the client connects again by itself (the same waits as `GameClient`'s) and the
new `wall` frame replaces `games` whole; 1008 ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import msgspec
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from orchestra_client.session import ConnectionRefused, FrameStream, Json

_decode = msgspec.json.Decoder(dict[str, Any]).decode


def apply_wall_changes(games: dict[str, Json], frame: Json) -> dict[str, Json]:
    """The games held after a `wall_changes` frame (a new dict, in the wall's order; `games` is left as
    it was): `retired` removed, `added` put first in the frame's order, each of `changed` updated (its
    fields replaced, of `chairs` only the spaces it names), and a game that ends moved to the head of the
    ended games. A change naming a game not held is ignored (the server sends changes of held games only)."""
    retired = set(frame.get("retired", ()))
    held: dict[str, Json] = {game["game_id"]: game for game in frame.get("added", ())}
    for game_id, game in games.items():
        if game_id not in retired and game_id not in held:
            held[game_id] = game
    ending: list[str] = []
    for change in frame.get("changed", ()):
        before = held.get(change["game_id"])
        if before is None:
            continue
        updated = {**before, **{k: v for k, v in change.items() if k not in ("game_id", "chairs")}}
        if "chairs" in change:
            updated["chairs"] = {**before["chairs"], **change["chairs"]}
        held[change["game_id"]] = updated
        if change.get("ended") is True and not before["ended"]:
            ending.append(change["game_id"])
    if not ending:
        return held
    live = [(g, game) for g, game in held.items() if not game["ended"]]
    ended = [(g, game) for g, game in held.items() if game["ended"] and g not in ending]
    return dict([*live, *((g, held[g]) for g in ending), *ended])


class WallClient(FrameStream):
    """One subscriber of the wall feed. Create it with `await WallClient.connect(...)`.

    `next_frame` and `frames` hand out each frame after the first `wall` (a `wall_changes`, a `wall_page`,
    or a `wall` after a reconnect), already applied to `games`. `total` is how many games the wall shows.
    """

    refused = frozenset({1008})  # the feed is refused for good only by a policy close

    def __init__(self, base_url: str, *, reconnect: bool) -> None:
        self.url = base_url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/wall/ws"
        self.reconnect = reconnect
        self.games: dict[str, Json] = {}
        self.ended_kept = 0
        self.total = 0
        self.received: list[Json] = []  # every frame received, in order (for tests and tools)
        self.reconnects = 0
        self.closed_with: tuple[int | None, str] | None = None
        self._ws: ClientConnection | None = None
        self._frames: asyncio.Queue[Json | None] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._closing = False

    @classmethod
    async def connect(cls, base_url: str, *, reconnect: bool = True, timeout: float = 10.0) -> WallClient:
        """Connect and wait for the `wall` frame. Raises: ConnectionRefused, OSError, TimeoutError."""
        client = cls(base_url, reconnect=reconnect)
        await asyncio.wait_for(client._open(), timeout)
        client._reader = asyncio.get_running_loop().create_task(client._read())
        return client

    async def __aenter__(self) -> WallClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def wait_until(self, check: Callable[[dict[str, Json]], bool], timeout: float = 10.0) -> None:
        """Wait until `games` satisfies `check` (looked at after each frame). Raises: TimeoutError."""

        async def reached() -> None:
            while not check(self.games):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(reached(), timeout)

    async def more(self) -> None:
        """Ask for another page of the wall: its `wall_page` frame adds its games after those held (none
        when every game is held already)."""
        await self.send_raw('{"type": "wall_more"}')

    async def send_raw(self, data: str | bytes) -> None:
        """Send any frame (the feed takes none: for tests)."""
        assert self._ws is not None
        await self._ws.send(data)

    async def drop(self) -> None:
        """Cut the connection abruptly (as a network would), leaving reconnecting to do its work."""
        if self._ws is not None and self._ws.transport is not None:
            self._ws.transport.abort()

    async def close(self) -> None:
        """Close the session."""
        self._closing = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    # internals ------------------------------------------------------------------------------------

    async def _open(self) -> None:
        ws = await websockets.connect(self.url, max_size=None, open_timeout=10, close_timeout=2)
        try:
            first = _decode(await ws.recv())
        except ConnectionClosed as exc:
            raise ConnectionRefused(exc.rcvd.code if exc.rcvd else None, "closed before the wall") from None
        if first.get("type") != "wall":
            await ws.close()
            raise ConnectionRefused(ws.close_code, "the first frame is not the wall", first)
        self.received.append(first)
        self._take_wall(first)
        self._ws = ws

    def _take_wall(self, frame: Json) -> None:
        self.games = {game["game_id"]: game for game in frame["games"]}
        self.ended_kept = int(frame["ended_kept"])
        self.total = int(frame.get("total", len(self.games)))
        self._changed.set()

    async def _reopen(self) -> None:
        await self._open()

    async def _resumed(self) -> None:
        self._frames.put_nowait(self.received[-1])  # the new `wall` frame: the games as they are now

    def _dispatch(self, frame: Json) -> None:
        self.received.append(frame)
        kind = frame.get("type")
        if kind == "wall":
            self._take_wall(frame)
        elif kind == "wall_changes":
            self.games = apply_wall_changes(self.games, frame)
            self.total = int(frame.get("total", self.total))
            self._changed.set()
        elif kind == "wall_page":
            for game in frame["games"]:
                self.games.setdefault(game["game_id"], game)
            self.total = int(frame["total"])
            self._changed.set()
        else:
            return  # a frame this client does not know: ignored, as the protocol asks
        self._frames.put_nowait(frame)
