"""A websocket session with one game: hello/welcome, commands and answers, live frames, auto-resume."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from orchestra_client.verify import SigningKeys, chain_hash, verify_envelope

# A JSON object as the server sent it: a frame, a view, a delta, an envelope.
Json = dict[str, Any]
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode
_ids = itertools.count(1)

# The events of a placement: what a take-back takes back (`GameClient.last_placement`).
PLACEMENT_EVENTS = ("ChairClaimed", "ChairStolen", "PlacedBelowLine")

# Close codes after which reconnecting cannot help: the server refused this client (1008), or the game's
# stored history cannot be read (1011, damaged_game). Every other end of a connection (a drop, 1012
# "service restart", 1013 "try again later") is retried.
# Close codes after which a reconnect cannot help: policy, a damaged game, the seat's token reissued by
# the host (4003) or the seat closed (4004).
TOKEN_REISSUED = 4003
SEAT_CLOSED = 4004
REFUSED = frozenset({1008, 1011, TOKEN_REISSUED, SEAT_CLOSED})
# The server's store no longer holds what this connection was sent (it lost acknowledged writes, and
# others were written at their versions): the resume takes the whole history again, from version 0.
HISTORY_CHANGED = 4001
# Resuming: waits drawn at random up to a ceiling that doubles from BACKOFF_BASE to BACKOFF_CAP ("full
# jitter"), so clients that lost one server together do not all come back in the same instant; a
# session gives up after RESUME_FOR seconds without a welcome.
BACKOFF_BASE = 0.1
BACKOFF_CAP = 2.0
RESUME_FOR = 60.0


class ConnectionRefused(Exception):
    """The server refused the hello (unknown game, bad token) or closed the session for good."""

    def __init__(self, code: int | None, reason: str, frame: Json | None = None) -> None:
        super().__init__(f"connection refused ({code}): {reason}")
        self.code, self.reason, self.frame = code, reason, frame


class DeltaMismatch(ValueError):
    """A `view_delta` does not apply to the view held (an addition starts past its list's end, or names a
    space or seat the view does not have)."""


def apply_delta(view: Json, delta: Json) -> Json:
    """The view after a `view_delta`: `spaces` replaced whole; for each space of `added`, its list cut to
    the index the addition starts at (shorter only after a take-back), the addition's tokens appended
    and its chair set; `score_changes` applied (each seat's `chairs` rebuilt from its counts, in the
    view's space order); `version` and `ended` its.

    Raises DeltaMismatch when the delta does not fit the view held.
    """
    spaces = {**view["spaces"], **delta.get("spaces", {})}
    for space_id, addition in delta.get("added", {}).items():
        space = spaces.get(space_id)
        field = "below" if addition["kind"] == "standard" else "chairs"
        start = addition[f"{field}_from"]
        if space is None or space.get("kind") != addition["kind"] or len(space[field]) < start:
            raise DeltaMismatch(f"{space_id}: the delta does not fit the view held")
        extended = {**space, field: [*space[field][:start], *addition[field]]}
        if field == "below":
            extended["chair"] = addition["chair"]
        spaces[space_id] = extended
    scores = list(view.get("scores", ()))
    for change in delta.get("score_changes", ()):
        index = next((i for i, score in enumerate(scores) if score["seat"] == change["seat"]), None)
        if index is None:
            raise DeltaMismatch(f"seat {change['seat']}: the view held has no score for it")
        scores[index] = _changed_score(scores[index], change, spaces)
    rest = {key: value for key, value in delta.items() if key not in ("spaces", "added", "score_changes")}
    return {**view, **rest, "spaces": spaces, "scores": scores}


def _changed_score(score: Json, change: Json, spaces: Json) -> Json:
    counts: dict[str, int] = {}
    for space_id in score["chairs"]:
        counts[space_id] = counts.get(space_id, 0) + 1
    counts.update(change.get("held", {}))
    if any(space_id not in spaces for space_id in counts):
        raise DeltaMismatch(f"seat {change['seat']}: a chair at a space the view held does not have")
    chairs = [space_id for space_id in spaces for _ in range(counts.get(space_id, 0))]
    return {**score, "prestige": change["prestige"], "resources": change["resources"], "chairs": chairs}


async def backoff(attempt: int) -> None:
    """Wait before resume attempt `attempt` (0, 1, ...): a random time under a ceiling that doubles from
    BACKOFF_BASE to BACKOFF_CAP."""
    await asyncio.sleep(random.uniform(0, min(BACKOFF_BASE * 2**attempt, BACKOFF_CAP)))


class FrameStream:
    """One websocket session: its frames read as they come, handed out until the session is over (then
    None), and connecting again after a drop, with backoff, until a welcome or `RESUME_FOR` seconds.

    A subclass says which close codes end the session for good (`refused`), what each frame does
    (`_dispatch`), how to connect again (`_reopen`), and what follows a resume (`_resumed`) and the end
    (`_ended`)."""

    refused: frozenset[int]
    reconnect: bool
    reconnects: int
    closed_with: tuple[int | None, str] | None
    _closing: bool
    _ws: ClientConnection | None
    _frames: asyncio.Queue[Json | None]

    async def next_frame(self, timeout: float = 10.0) -> Json:
        """The next frame this session hands out (see the subclass for which).

        Raises: TimeoutError; ConnectionRefused when the session ended.
        """
        frame = await asyncio.wait_for(self._frames.get(), timeout)
        if frame is None:
            self._frames.put_nowait(None)
            code, reason = self.closed_with or (None, "closed")
            raise ConnectionRefused(code, reason)
        return frame

    async def frames(self) -> AsyncIterator[Json]:
        """Every further frame until the session ends."""
        while True:
            frame = await self._frames.get()
            if frame is None:
                self._frames.put_nowait(None)
                return
            yield frame

    def _dispatch(self, frame: Json) -> None:
        raise NotImplementedError

    async def _reopen(self) -> None:
        """Connect again, up to the first frame. Raises: ConnectionRefused, OSError, TimeoutError..."""
        raise NotImplementedError

    async def _resumed(self) -> None:
        """Connected again."""

    def _ended(self) -> None:
        """The session is over for good."""

    async def _read(self) -> None:
        while True:
            assert self._ws is not None
            try:
                async for text in self._ws:
                    self._dispatch(_decode(text))
                code, reason = self._ws.close_code, self._ws.close_reason or ""
            except ConnectionClosed as exc:
                code, reason = (exc.rcvd.code, exc.rcvd.reason) if exc.rcvd else (None, "dropped")
            self.closed_with = (code, reason)
            if self._closing or not self.reconnect or code in self.refused or not await self._resume():
                break
        self._ended()
        self._frames.put_nowait(None)

    async def _resume(self) -> bool:
        give_up = time.monotonic() + RESUME_FOR
        for attempt in itertools.count():
            if time.monotonic() >= give_up:
                return False
            await backoff(attempt)
            try:
                await self._reopen()
            except ConnectionRefused as exc:
                if exc.code in self.refused:
                    return False
                continue  # 1012 or 1013 before the first frame: the server is restarting or busy
            except (OSError, TimeoutError, ConnectionClosed, websockets.InvalidHandshake):
                continue
            self.reconnects += 1
            await self._resumed()
            return True
        return False


class GameClient(FrameStream):
    """One client of one game. Create it with `await GameClient.connect(...)`.

    `next_frame` and `frames` hand out every frame that is not an answer to a command sent with `send`
    (events, rejections...); presence frames only update `presence`.
    """

    refused = REFUSED

    def __init__(
        self,
        base_url: str,
        game_id: str,
        token: str | None,
        *,
        view: bool | str | None,
        reconnect: bool,
        keys: SigningKeys | None = None,
    ) -> None:
        self.url = base_url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/")
        self.url += f"/games/{game_id}/ws"
        self.game_id, self.token, self.wants_view, self.reconnect = game_id, token, view, reconnect
        self.welcome: Json = {}
        self.view: Json | None = None
        self.version = 0
        self.envelopes: list[Json] = []  # every envelope received, in order of arrival
        self.received: list[Json] = []  # every frame received, in order (for tests and tools)
        # Who is at the table: the last presence frame's `seats` and `spectators` (None before the first).
        self.presence: Json | None = None
        self._presence_seen = asyncio.Event()
        # The ended game's next game, once started: {"game_id", "token" (this connection's there)}.
        self.next_game: Json | None = None
        self._next_game_seen = asyncio.Event()
        self.reconnects = 0
        self.closed_with: tuple[int | None, str] | None = None
        # With `verify`: the keys each envelope is checked against, the version and chain hash of the last
        # envelope held (the next one's `prev`), and why the session ended if an envelope failed.
        self.keys = keys
        self._head: tuple[int, str] | None = None
        self.unverified: str | None = None
        self._ws: ClientConnection | None = None
        self._pending: dict[str, tuple[Json, asyncio.Future[Json]]] = {}
        # Accepted answers that came before their events frame: each is handed out once its version is in.
        self._settling: list[tuple[Json, asyncio.Future[Json]]] = []
        self._frames: asyncio.Queue[Json | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._closing = False
        self._connected = asyncio.Event()

    @classmethod
    async def connect(
        cls,
        base_url: str,
        game_id: str,
        token: str | None = None,
        *,
        since: int | None = None,
        view: bool | str | None = None,
        reconnect: bool = True,
        timeout: float = 10.0,
        verify: bool | SigningKeys = False,
    ) -> GameClient:
        """Connect, say hello (resuming after `since` when given) and wait for the welcome.

        `view` is the hello's (None: the server's default, view deltas, which `client.view` follows).
        `verify`: check every envelope received (in `events` and `accepted` frames) against the server's
        keys (True: fetched from GET /signing-keys; or a `SigningKeys`), and each one's `prev` against the
        envelope before it when held; the first that fails ends the session (`unverified` says why).

        Raises: ConnectionRefused, OSError, TimeoutError, httpx.HTTPError (fetching the keys).
        """
        keys = await SigningKeys.fetch(base_url) if verify is True else verify or None
        client = cls(base_url, game_id, token, view=view, reconnect=reconnect, keys=keys)
        await asyncio.wait_for(client._open(since), timeout)
        client._reader = asyncio.get_running_loop().create_task(client._read())
        return client

    async def __aenter__(self) -> GameClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def seat(self) -> int | None:
        """This client's seat, None for a spectator."""
        seat: int | None = self.welcome.get("seat")
        return seat

    @property
    def last_placement(self) -> Json | None:
        """The envelope of this seat's placement while it is the last envelope delivered and the game has
        not ended, else None: when a take-back may be offered (the server still decides: another seat's
        command may land first)."""
        if self.closed_with is not None or self.seat is None or not self.envelopes:
            return None
        last = self.envelopes[-1]
        event = last.get("event") or {}
        if last.get("version") != self.version or event.get("type") not in PLACEMENT_EVENTS:
            return None
        if event.get("seat") != self.seat or (self.view is not None and self.view.get("ended")):
            return None
        return last

    async def send(self, frame: Json, timeout: float = 10.0) -> Json:
        """Send a command frame (an `id` is added if missing) and return its answer: an `accepted` answer
        once its envelopes have been delivered (so `view` and `version` include them), or the rejection.
        `timeout` bounds it all, a wait for the connection to come back included (the same id may be sent
        again: a command is applied once).

        Raises: TimeoutError, ConnectionRefused.
        """
        if self._reader is not None and self._reader.done():
            # The session is over (refused, closed, or out of reconnect attempts): nobody would answer.
            code, reason = self.closed_with or (None, "closed")
            raise ConnectionRefused(code, reason)
        frame = dict(frame)
        frame.setdefault("id", f"c{next(_ids)}")
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self._pending[frame["id"]] = (frame, future)
        try:
            async with asyncio.timeout(timeout):
                await self._write(frame)
                return await asyncio.shield(future)
        finally:
            self._pending.pop(frame["id"], None)
            if self._settling:
                self._settling = [entry for entry in self._settling if entry[1] is not future]

    async def place(self, token: Json, space: str, **fields: Any) -> Json:
        """Place a token; `fields` are the frame's other fields (id, skill, consolation, materials...)."""
        return await self.send({"type": "place", "token": token, "space": space, **fields})

    async def take_back(self, **fields: Any) -> Json:
        """Take back this seat's placement while it is the game's last event (`fields`: id,
        expected_version); otherwise the answer is a `cannot_take_back` rejection."""
        return await self.send({"type": "take_back", **fields})

    async def end_game(self, **fields: Any) -> Json:
        """End the game (seat 0 only)."""
        return await self.send({"type": "end_game", **fields})

    async def take_seat(self, name: str, **fields: Any) -> Json:
        """Name this client's open seat (`seat_taken` when it has a name already)."""
        return await self.send({"type": "take_seat", "name": name, **fields})

    async def play_again(self, **fields: Any) -> Json:
        """Start the ended game's next game, or get the one started already (`game_not_over` before the
        end); the `next_game` frame that follows sets `next_game` (see `wait_for_next_game`)."""
        return await self.send({"type": "play_again", **fields})

    async def wait_for_next_game(self, timeout: float = 10.0) -> Json:
        """The ended game's next game, once a `next_game` frame named it: {"game_id", "token"} (no token
        for a public spectator). Raises: TimeoutError."""
        await asyncio.wait_for(self._next_game_seen.wait(), timeout)
        assert self.next_game is not None
        return self.next_game

    async def send_raw(self, data: str | bytes) -> None:
        """Send any text or bytes as one frame (for tests of hostile input)."""
        assert self._ws is not None
        await self._ws.send(data)

    async def wait_for_presence(self, check: Callable[[Json], bool], timeout: float = 30.0) -> Json:
        """Wait until `client.presence` satisfies `check` (it changes with each presence frame); return it.

        Raises: TimeoutError.
        """

        async def reached() -> Json:
            while self.presence is None or not check(self.presence):
                self._presence_seen.clear()
                await self._presence_seen.wait()
            return self.presence

        return await asyncio.wait_for(reached(), timeout)

    async def wait_for_version(self, version: int, timeout: float = 10.0) -> None:
        """Wait until envelopes up to `version` have arrived. Raises: TimeoutError."""

        async def reached() -> None:
            while self.version < version:
                await self.next_frame(timeout)

        await asyncio.wait_for(reached(), timeout)

    async def close(self) -> None:
        """Close the session."""
        self._closing = True
        if self._ws is not None:
            try:
                await self._ws.close()
            finally:
                # A peer that vanished mid-close (a killed server) must not leave the socket open.
                transport = self._ws.transport
                if transport is not None and not transport.is_closing():
                    transport.abort()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    async def drop(self) -> None:
        """Cut the connection abruptly (as a network would), leaving auto-reconnect to do its work."""
        if self._ws is not None and self._ws.transport is not None:
            self._ws.transport.abort()

    # internals ------------------------------------------------------------------------------------

    async def _open(self, since: int | None) -> None:
        self._connected.clear()
        ws = await websockets.connect(self.url, max_size=None, open_timeout=10, close_timeout=2)
        hello: Json = {"type": "hello", "token": self.token, "since": since}
        if self.wants_view is not None:
            hello["view"] = self.wants_view
        await ws.send(_encode(hello).decode())
        try:
            first = _decode(await ws.recv())
        except ConnectionClosed as exc:
            raise ConnectionRefused(exc.rcvd.code if exc.rcvd else None, "closed before welcome") from None
        if first.get("type") != "welcome":
            with contextlib.suppress(ConnectionClosed):
                await ws.recv()
            await ws.close()
            code = ws.close_code
            raise ConnectionRefused(code, str(first.get("message", "refused")), first)
        self.welcome = first
        self.view = first["view"]
        if since is None:
            self.version = first["version"]
        else:  # the caller holds 1..since: a resume before any new envelope must not ask for them again
            self.version = max(self.version, min(since, first["version"]))
        self._ws = ws
        self._connected.set()
        if self._settling:
            self._settle()

    async def _write(self, frame: Json) -> None:
        await self._connected.wait()
        assert self._ws is not None
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(_encode(frame).decode())

    async def _reopen(self) -> None:
        if self.closed_with is not None and self.closed_with[0] == HISTORY_CHANGED:
            self.envelopes.clear()
            self.version = 0
            self._head = None
        await self._open(self.version)

    async def _resumed(self) -> None:
        for frame, future in list(self._pending.values()):
            if not future.done():
                await self._write(frame)

    def _ended(self) -> None:
        if self.unverified is not None:
            self.closed_with = (None, self.unverified)
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionRefused(*(self.closed_with or (None, "closed"))))

    def _verified(self, frame: Json) -> bool:
        """Whether every envelope of a frame is the server key's, and follows the one before when held;
        if not, the session ends (no resume: the server sent it)."""
        assert self.keys is not None
        head = self._head
        for envelope in frame.get("envelopes" if frame["type"] == "events" else "events", ()):
            version = envelope.get("version")
            problem = verify_envelope(envelope, self.keys).problem
            linked = head is not None and version == head[0] + 1
            if problem is None and linked and head is not None and envelope["prev"] != head[1]:
                problem = f"its prev is not the chain hash of version {head[0]}"
            if problem is not None:
                self.unverified = f"envelope {version} does not verify: {problem}"
                self._closing = True
                if self._ws is not None and self._ws.transport is not None:
                    self._ws.transport.abort()
                return False
            if head is None or version > head[0]:
                head = (version, chain_hash(envelope))
        if frame["type"] == "events":
            self._head = head
        return True

    def _settle(self) -> None:
        """Hand out the accepted answers whose envelopes have now been delivered."""
        waiting, self._settling = self._settling, []
        for answer, future in waiting:
            if answer["version"] > self.version:
                self._settling.append((answer, future))
            elif not future.done():
                future.set_result(answer)

    def _dispatch(self, frame: Json) -> None:
        if self.unverified is not None:
            return  # the session is ending: nothing after an envelope that failed is taken
        self.received.append(frame)
        kind = frame.get("type")
        if self.keys is not None and kind in ("events", "accepted") and not self._verified(frame):
            return
        if kind == "presence":  # kept in `presence`, not queued: next_frame() yields the game's frames
            self.presence = {"seats": frame["seats"], "spectators": frame["spectators"]}
            self._presence_seen.set()
            return
        if kind == "next_game":  # kept in `next_game`, and queued too
            self.next_game = {key: value for key, value in frame.items() if key != "type"}
            self._next_game_seen.set()
        if kind in ("accepted", "rejected") and frame.get("id") in self._pending:
            _, future = self._pending[frame["id"]]
            if kind == "accepted" and frame.get("version", 0) > self.version:
                self._settling.append((frame, future))  # the answer came before its events frame
            elif not future.done():
                future.set_result(frame)
            return
        if kind == "events":
            for envelope in frame["envelopes"]:
                self.envelopes.append(envelope)
                self.version = max(self.version, envelope["version"])
            if "view" in frame:
                self.view = frame["view"]
            elif "view_delta" in frame and self.view is not None:
                try:
                    self.view = apply_delta(self.view, frame["view_delta"])
                except DeltaMismatch:
                    # Never guess: drop the connection, and the resume's welcome brings the whole view.
                    self.view = None
                    if self._ws is not None and self._ws.transport is not None:
                        self._ws.transport.abort()
            if self._settling:
                self._settle()
        self._frames.put_nowait(frame)
