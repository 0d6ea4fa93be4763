"""The limit of the stack: a minimal game server on the same stack as ours, speaking the same frames.

Starlette on uvicorn (ws="websockets-sansio") on the same event loop (uvloop), msgspec, redis-py asyncio
with hiredis parsing and packing (bench/hiredis_packing.py), the same Redis.
Per command: one msgspec decode, one Lua conditional append (the very script of every append of ours,
server.store.redis.APPEND_SCRIPT, with one append: command-id check, expected-version check, XADD; without
the check of the line appended after, which ours makes), one `accepted` answer to the
sender, one `events` frame (encoded once) to every client of the game. No rules, no projections, no
views, no auth, no logging, no batching: whatever our server costs beyond this is its own.

With `--views`, each `events` frame also carries a "view" as large as ours: every token placed so far,
as `{"seat": ..., "token": ...}` in its space's list (our view's chairs and below-the-line lists hold the
same entries), kept encoded space by space so a command re-encodes only the space it touched. No rules
decide where a token lands: it is the bytes that such a frame costs the stack, and nothing else.

With `--sign`, every envelope is signed as ours are (an Ed25519 signature by server.engine.signing's
`Signer`, in the same line format, with a key made at start): the baseline for what the rest of our
server costs once the signature, which the minimal pipeline otherwise lacks, is set aside. With `--pad`,
envelopes are as long as signed ones (a key id, and a placeholder as long as a signature where one goes)
but none is signed: the control that tells what a signature costs in CPU from what its bytes cost.

    python -m bench.minimal serve --port 0 --redis-url redis://127.0.0.1:PORT [--views] [--sign | --pad]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import uvicorn
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from bench.hiredis_packing import use_hiredis_packing
from server.engine.signing import ENVELOPE, Signer
from server.ops.runner import run as run_on_servers_loop
from server.ops.runner import started_url
from server.store.redis import APPEND_SCRIPT
from server.store.redis.keys import commands_key, events_key


class Hello(msgspec.Struct):
    type: str
    token: str | None = None
    since: int | None = None
    # Ignored (frames carry a view only with --views); read as any of the values ours takes.
    view: bool | str = True


class Place(msgspec.Struct):
    type: str
    id: str
    token: msgspec.Raw
    space: str


class Event(msgspec.Struct):
    type: str
    seat: int
    space: str
    token: msgspec.Raw


class Envelope(msgspec.Struct):
    game_id: str
    version: int
    at: float
    command_id: str | None
    seat: int | None
    event: Event | None


# What --pad puts where a key id and a signature go: their lengths (16 hex digits; an Ed25519
# signature, 64 bytes, in base64), not their work.
PAD_KEY = "0" * 16
PAD_SIG = b'"' + b"A" * 86 + b'=="}'
_NULL_SIG = b"null}"


class SignedEnvelope(Envelope):
    """An envelope as ours are signed: the key's id, then the signature (null until signed)."""

    key: str = ""
    sig: None = None


class Accepted(msgspec.Struct, tag_field="type", tag="accepted"):
    id: str
    version: int
    events: list[msgspec.Raw]


class Events(msgspec.Struct, tag_field="type", tag="events"):
    envelopes: list[msgspec.Raw]


class EventsWithView(msgspec.Struct, tag_field="type", tag="events"):
    envelopes: list[msgspec.Raw]
    view: msgspec.Raw


class Placed(msgspec.Struct):
    seat: int
    token: msgspec.Raw


class Welcome(msgspec.Struct, tag_field="type", tag="welcome"):
    role: str
    seat: int | None
    version: int
    view: dict[str, Any]


class Rejected(msgspec.Struct, tag_field="type", tag="rejected"):
    id: str | None
    code: str
    message: str
    version: int


encode = msgspec.json.Encoder().encode
decode_hello = msgspec.json.Decoder(Hello).decode
decode_place = msgspec.json.Decoder(Place).decode
decode_body = msgspec.json.Decoder(dict[str, Any]).decode


class Game:
    """One game: its version, a lock serialising its appends, its connected clients (and, with views,
    each space's placements, encoded)."""

    __slots__ = ("version", "lock", "clients", "placed", "spaces")

    def __init__(self, version: int) -> None:
        self.version = version
        self.lock = asyncio.Lock()
        self.clients: list[WebSocket] = []
        self.placed: dict[str, list[bytes]] = {}
        self.spaces: dict[str, bytes] = {}

    def view(self, space: str, seat: int, token: msgspec.Raw) -> bytes:
        """The view after placing `token`: only the touched space is encoded again."""
        entries = self.placed.setdefault(space, [])
        entries.append(encode(Placed(seat, token)))
        self.spaces[space] = b'"%s":[%s]' % (space.encode(), b",".join(entries))
        return b'{"spaces":{%s}}' % b",".join(self.spaces.values())


class State:
    def __init__(self, redis_url: str, views: bool, signer: Signer | None, pad: bool = False) -> None:
        self.views = views
        self.signer = signer
        self.pad = pad
        self.redis = use_hiredis_packing(Redis.from_url(redis_url))
        self.append = self.redis.register_script(APPEND_SCRIPT)
        self.games: dict[str, Game] = {}

    def line(
        self, game_id: str, version: int, command_id: str | None, seat: int | None, event: Event | None
    ) -> bytes:
        """An envelope's stored bytes: signed as ours when there is a signer, as long as that if padded."""
        signer, at = self.signer, time.time()
        if self.pad:
            unsigned = encode(SignedEnvelope(game_id, version, at, command_id, seat, event, key=PAD_KEY))
            return unsigned[: -len(_NULL_SIG)] + PAD_SIG
        if signer is None:
            return encode(Envelope(game_id, version, at, command_id, seat, event))
        signed = SignedEnvelope(game_id, version, at, command_id, seat, event, key=signer.key_id)
        return signer.sign(ENVELOPE, encode(signed))


def create_app(redis_url: str, views: bool = False, sign: bool = False, pad: bool = False) -> Starlette:
    state = State(redis_url, views, Signer.generate() if sign else None, pad=pad)
    counter = itertools.count(1)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await state.redis.aclose()

    async def create_game(request: Request) -> Response:
        body = decode_body(await request.body())
        players = list(body.get("players", []))
        game_id = f"m-{uuid.uuid4().hex[:12]}-{next(counter)}"
        first = state.line(game_id, 1, "create", None, None)
        await state.redis.xadd(events_key(game_id), {"e": first}, id="0-1")
        state.games[game_id] = Game(1)
        seats = [{"seat": i, "name": name, "token": f"seat-{i}"} for i, name in enumerate(players)]
        return Response(
            encode({"game_id": game_id, "version": 1, "seats": seats}),
            status_code=201,
            media_type="application/json",
        )

    async def socket(websocket: WebSocket) -> None:
        game_id: str = websocket.path_params["game_id"]
        await websocket.accept()
        hello = decode_hello(await websocket.receive_text())
        game = state.games.get(game_id)
        if game is None:
            await websocket.close(1008)
            return
        seat = int(hello.token.split("-", 1)[1]) if hello.token else None
        role = "player" if seat is not None else "spectator"
        await websocket.send_text(encode(Welcome(role, seat, game.version, {})).decode())
        game.clients.append(websocket)
        try:
            while True:
                text = await websocket.receive_text()
                await command(game_id, game, websocket, seat, text)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            game.clients.remove(websocket)

    async def command(game_id: str, game: Game, websocket: WebSocket, seat: int | None, text: str) -> None:
        frame = decode_place(text)
        if seat is None:
            rejected = Rejected(frame.id, "forbidden", "spectators cannot send commands", game.version)
            await websocket.send_text(encode(rejected).decode())
            return
        async with game.lock:
            expected = game.version
            event = Event("ChairClaimed", seat, frame.space, frame.token)
            data = state.line(game_id, expected + 1, frame.id, seat, event)
            # Two keys an append (no notice channel), then its expected version, command key, no line
            # to check, and its one envelope.
            ((first, last, _),) = await state.append(
                keys=[events_key(game_id), commands_key(game_id)],
                args=[2, expected, f"{seat}:{frame.id}", "", 1, data],
            )
            game.version = int(last)
        raw = [msgspec.Raw(data)]
        await websocket.send_text(encode(Accepted(frame.id, int(last), raw)).decode())
        if state.views:
            view = game.view(frame.space, seat, frame.token)
            shared = encode(EventsWithView(raw, msgspec.Raw(view))).decode()
        else:
            shared = encode(Events(raw)).decode()
        for client in list(game.clients):
            with contextlib.suppress(Exception):
                await client.send_text(shared)

    return Starlette(
        routes=[
            Route("/games", create_game, methods=["POST"]),
            WebSocketRoute("/games/{game_id}/ws", socket),
        ],
        lifespan=lifespan,
    )


def serve(
    port: int,
    redis_url: str,
    host: str = "127.0.0.1",
    loop: str = "same",
    views: bool = False,
    compression: bool = False,
    sign: bool = False,
    pad: bool = False,
) -> None:
    """Serve until SIGTERM; `loop` "same" (the event loop `orchestra serve` runs: uvloop) or "asyncio".

    permessage-deflate is declined unless `compression`, as `orchestra serve` declines it by default
    (uvicorn's own default accepts it, which would make the baseline compress every frame ours sends
    plain).
    """
    config = uvicorn.Config(
        create_app(redis_url, views, sign, pad),
        host=host,
        port=port,
        ws="websockets-sansio",
        ws_max_size=64 * 1024,
        ws_per_message_deflate=compression,
        lifespan="on",
        log_config=None,
        log_level="warning",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)

    async def announce() -> None:
        url = await started_url(server)
        if url is not None:
            print(f"Minimal server running at {url}/", flush=True)

    async def run() -> None:
        watcher = asyncio.create_task(announce())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    if loop == "asyncio":
        asyncio.run(run())
    else:
        run_on_servers_loop(run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.minimal", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="run the minimal server")
    run.add_argument("--port", type=int, default=8001)
    run.add_argument("--redis-url", required=True)
    run.add_argument("--loop", choices=["same", "asyncio"], default="same")
    run.add_argument("--views", action="store_true", help="a view as large as ours in every events frame")
    run.add_argument("--compression", action="store_true", help="accept permessage-deflate")
    how = run.add_mutually_exclusive_group()
    how.add_argument("--sign", action="store_true", help="sign every envelope as ours are")
    how.add_argument("--pad", action="store_true", help="envelopes as long as signed ones, none signed")
    args = parser.parse_args(argv)
    serve(
        args.port,
        args.redis_url,
        loop=args.loop,
        views=args.views,
        compression=args.compression,
        sign=args.sign,
        pad=args.pad,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
