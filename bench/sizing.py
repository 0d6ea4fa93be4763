"""Sizing of one node and of Redis: what a game and a connection cost, measured (docs/operations.md).

    python -m bench.sizing [--games 200] [--placements 20] [--connections 1000] [--compression deflate|none]
                           [--long-game 200] [--out FILE]

Starts its own redis-server (appendfsync always, a free loopback port) and one `orchestra serve` node,
then measures the node's RSS (psutil) at three points:

1. after a warm-up (a game played, a spectator connected and gone): the base;
2. with `--games` active games, each played for `--placements` placements by its one connected player:
   RSS per active game (its folded state, its view, its tail, its player's connection);
3. with `--connections` more idle spectators spread over the first ten games: RSS per idle connection
   (`--compression none`: spectators that do not ask for permessage-deflate).

Then it plays one game of `--long-game` placements to its end and reads MEMORY USAGE (exact, SAMPLES 0)
of the game's three Redis keys: the Redis memory one finished game holds until it is archived. Its
commands come one at a time, so each envelope is a batch of one (`proof_bytes` below).

Also, computed without a server: the bytes a stored envelope's proof adds to its body for a batch of 1, 4,
16 and 64 envelopes (an inclusion path of 0, 2, 4 and 6 hashes), against the signature an envelope signed
alone carries (`,"sig":"<88 characters>"`). `--proofs` prints those alone.
Bounded: every step has a deadline; everything it started is stopped on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import redis
import websockets
from websockets.asyncio.client import ClientConnection

from bench.common import RedisServer, ServerProcess, raise_nofile
from domain import Layout
from orchestra_client import GameClient, create_game, get_events
from orchestra_client.bots import random_placement, read_layout
from server.engine.notary import signed_batch
from server.engine.signing import ENVELOPE, Signer, time_text
from server.store.redis.keys import auth_key, commands_key, events_key

MiB = 1024 * 1024
DEADLINE = 300.0
# The node as deployed: every limit at its default, but no rate limit on the bench's own players.
NODE_ENV = {"ORCHESTRA_RATE_PER_SECOND": "1000000", "ORCHESTRA_RATE_BURST": "1000000"}


async def settled_rss(process: psutil.Process, wait: float = 1.0) -> int:
    """The node's RSS once it had `wait` seconds to finish what it was doing (the lowest of 5 reads)."""
    await asyncio.sleep(wait)
    readings = []
    for _ in range(5):
        readings.append(int(process.memory_info().rss))
        await asyncio.sleep(0.1)
    return min(readings)


async def play(url: str, layout: Layout, game_id: str, token: str, placements: int, seed: int) -> GameClient:
    """Connect a player and make `placements` accepted placements; the player stays connected."""
    rng = random.Random(seed)
    player = await GameClient.connect(url, game_id, token, reconnect=False)
    for n in range(placements):
        frame = random_placement(layout, rng)
        answer = await player.place(frame.pop("token"), frame.pop("space"), id=f"p{n}", **frame)
        if answer["type"] != "accepted":
            raise RuntimeError(f"game {game_id}: placement {n} refused: {answer}")
    return player


async def open_games(
    url: str, layout: Layout, count: int, placements: int
) -> tuple[list[str], list[GameClient]]:
    """`count` games, played concurrently ten at a time; their ids and their connected players."""
    ids: list[str] = []
    players: list[GameClient] = []
    for start in range(0, count, 10):
        created = [await create_game(url, ["Solo"]) for _ in range(min(10, count - start))]
        batch = [
            play(url, layout, c["game_id"], c["seats"][0]["token"], placements, start + i)
            for i, c in enumerate(created)
        ]
        players += await asyncio.gather(*batch)
        ids += [c["game_id"] for c in created]
    return ids, players


async def spectate(url: str, game_id: str, compression: str) -> ClientConnection:
    """An idle spectator: hello, welcome, then nothing (with or without permessage-deflate)."""
    ws_url = url.replace("http://", "ws://") + f"/games/{game_id}/ws"
    ws = await websockets.connect(ws_url, compression=None if compression == "none" else "deflate")
    await ws.send(json.dumps({"type": "hello", "token": None, "since": None}))
    welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
    if welcome.get("type") != "welcome":
        raise RuntimeError(f"spectator refused: {welcome}")
    return ws


async def long_game(url: str, layout: Layout, redis_url: str, placements: int) -> dict[str, Any]:
    """A three-player game of `placements` placements, ended; the Redis memory its keys hold."""
    created = await create_game(url, ["Ada", "Ben", "Cy"])
    game_id = created["game_id"]
    seats = [await GameClient.connect(url, game_id, s["token"], reconnect=False) for s in created["seats"]]
    rng = random.Random(200)
    try:
        for n in range(placements):
            frame = random_placement(layout, rng)
            answer = await seats[n % 3].place(frame.pop("token"), frame.pop("space"), id=f"m{n}", **frame)
            if answer["type"] != "accepted":
                raise RuntimeError(f"placement {n} refused: {answer}")
        if (await seats[0].end_game(id="end"))["type"] != "accepted":
            raise RuntimeError("the long game did not end")
    finally:
        for seat in seats:
            await seat.close()
    envelopes = await get_events(url, game_id)
    stored = sum(len(json.dumps(e, separators=(",", ":")).encode()) for e in envelopes)
    keys = {"events": events_key(game_id), "auth": auth_key(game_id), "commands": commands_key(game_id)}
    with redis.Redis.from_url(redis_url, socket_timeout=5) as client:
        usage = {name: int(client.memory_usage(key, samples=0) or 0) for name, key in keys.items()}
        length = int(client.xlen(keys["events"]))
    total = sum(usage.values())
    return {
        "game_id": game_id,
        "placements": placements,
        "events": length,
        "envelope_bytes": stored,
        "memory_usage_bytes": usage,
        "total_bytes": total,
        "bytes_per_event": round(total / length),
        "command": f"MEMORY USAGE {keys['events']} SAMPLES 0 (and the :auth and :commands keys)",
    }


BATCHES = (1, 4, 16, 64)


def proof_bytes() -> dict[str, Any]:
    """What signing adds to a stored envelope's body: a signature alone, and a proof per batch size (the
    most any envelope of the batch carries: the longest path, the widest index)."""
    signer = Signer.generate()
    unsigned = b'{"game_id":"g","version":1,"key":"%s","sig":null}' % signer.key_id.encode()
    body = unsigned[: -len(b',"sig":null}')] + b"}"
    alone = len(signer.sign(ENVELOPE, unsigned)) - len(body)
    at = time_text(datetime.now(UTC))
    batches: dict[str, int] = {}
    for size in BATCHES:
        lines = signed_batch([body] * size, signer, at)
        batches[str(size)] = max(len(line) for line in lines) - len(body)
    return {
        "signed_alone": alone,
        "proof_by_batch_size": batches,
        "proof_minus_signature_by_batch_size": {size: added - alone for size, added in batches.items()},
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    raise_nofile(args.connections + 2 * args.games + 1000)
    with RedisServer(fsync_always=True) as store, ServerProcess("ours", store.url, NODE_ENV) as node:
        process = psutil.Process(node.pid)
        url = node.url
        # Warm-up: imports, pools, the first game's code paths, a spectator's path.
        warm = await create_game(url, ["Warm"])
        layout = await read_layout(url, warm["game_id"])
        await (await play(url, layout, warm["game_id"], warm["seats"][0]["token"], 5, 0)).close()
        async with await GameClient.connect(url, warm["game_id"], reconnect=False):
            pass
        started = time.monotonic()
        base = await settled_rss(process)

        ids, players = await open_games(url, layout, args.games, args.placements)
        with_games = await settled_rss(process)

        spectators: list[ClientConnection] = []
        for start in range(0, args.connections, 100):
            batch = [
                spectate(url, ids[(start + i) % min(10, len(ids))], args.compression)
                for i in range(min(100, args.connections - start))
            ]
            spectators += await asyncio.gather(*batch)
        with_connections = await settled_rss(process)
        for ws in spectators:
            await ws.close()
        for player in players:
            await player.close()
        gc.collect()

        redis_game = await long_game(url, layout, store.url, args.long_game)
        elapsed = time.monotonic() - started

    per_game = (with_games - base) / args.games
    per_connection = (with_connections - with_games) / args.connections
    return {
        "node": {
            "games": args.games,
            "placements_per_game": args.placements,
            "idle_connections": args.connections,
            "compression": args.compression,
            "rss_base_mib": round(base / MiB, 1),
            "rss_with_games_mib": round(with_games / MiB, 1),
            "rss_with_connections_mib": round(with_connections / MiB, 1),
            "rss_per_active_game_kib": round(per_game / 1024, 1),
            "rss_per_idle_connection_kib": round(per_connection / 1024, 1),
        },
        "redis_per_finished_game": redis_game,
        "proof_bytes": proof_bytes(),
        "seconds": round(elapsed, 1),
        "python": sys.version.split()[0],
        "cpus": psutil.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sizing", description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=200, help="active games on the node (default 200)")
    parser.add_argument("--placements", type=int, default=20, help="placements per active game (default 20)")
    parser.add_argument("--connections", type=int, default=1000, help="idle spectators (default 1000)")
    parser.add_argument(
        "--compression",
        choices=("deflate", "none"),
        default="deflate",
        help="whether the spectators ask for permessage-deflate, as browsers do (default deflate)",
    )
    parser.add_argument("--long-game", type=int, default=200, help="placements of the Redis-memory game")
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--proofs", action="store_true", help="only the bytes a proof adds, per batch size")
    args = parser.parse_args(argv)
    if args.proofs:
        print(json.dumps(proof_bytes(), indent=2))
        return 0
    if min(args.games, args.placements, args.connections, args.long_game) < 1:
        parser.error("every count must be at least 1")
    result = asyncio.run(asyncio.wait_for(measure(args), DEADLINE))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
