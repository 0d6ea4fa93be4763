"""What a live frame weighs in each hello view mode, over a whole game (the sizes docs/protocol.md quotes).

    .venv/bin/python scripts/frame_sizes.py                       # 4 players, 1,000 random placements
    .venv/bin/python scripts/frame_sizes.py --placements 200 --players 2 --seed 7 [--json]

Starts its own server (embedded Redis, as scripts/transcript.py does, with no rate limit on its players),
connects a spectator of each view mode (`"delta"`, `"full"`, `false`), has the players make random legal
placements until the game is at `--placements` (or the server's limit), ends it, and reports for each
mode the size of the live frames as sent (UTF-8 bytes): a placement's frame (median, largest, the last
one) and the frame of the end, whose `GameEnded` envelope carries every seat's score.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
from typing import Any

import websockets
from transcript import own_server

from orchestra_client import GameClient, create_game
from orchestra_client.bots import random_placement, read_layout

MODES: dict[str, Any] = {"delta": "delta", "full": "full", "none": False}


async def measure(url: str, players: int, placements: int, seed: int) -> dict[str, Any]:
    created = await create_game(url, [f"P{n}" for n in range(players)])
    game_id = created["game_id"]
    clients = [
        await GameClient.connect(url, game_id, seat["token"], reconnect=False) for seat in created["seats"]
    ]
    received: dict[str, list[str]] = {mode: [] for mode in MODES}

    async def watch(mode: str) -> None:
        ws_url = url.replace("http://", "ws://") + f"/games/{game_id}/ws"
        async with websockets.connect(ws_url, max_size=None, compression=None) as ws:
            await ws.send(json.dumps({"type": "hello", "token": None, "view": MODES[mode]}))
            await ws.recv()  # the welcome
            started.set()
            while True:
                text = await ws.recv()
                assert isinstance(text, str)
                if json.loads(text)["type"] == "presence":
                    continue  # who is at the table: not a live frame of the game's events
                received[mode].append(text)
                if '"GameEnded"' in text:
                    return

    watchers = []
    for mode in MODES:
        started = asyncio.Event()
        watchers.append(asyncio.create_task(watch(mode)))
        await started.wait()
    layout = await read_layout(url, game_id)
    rng = random.Random(seed)
    for number in range(placements):
        frame = {"type": "place", "id": f"p-{number}", **random_placement(layout, rng)}
        answer = await clients[number % players].send(frame)
        if answer["type"] == "rejected" and answer["code"] == "limit_reached":
            break
        assert answer["type"] == "accepted", answer
    await clients[0].end_game()
    await asyncio.wait_for(asyncio.gather(*watchers), 60)
    for client in clients:
        await client.close()
    report: dict[str, Any] = {"players": players, "placements": len(received["delta"]) - 1, "seed": seed}
    for mode, frames in received.items():
        sizes = [len(text.encode()) for text in frames]
        report[mode] = {
            "placement_median": int(statistics.median(sizes[:-1])),
            "placement_max": max(sizes[:-1]),
            "placement_last": sizes[-2],
            "end": sizes[-1],
        }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--placements", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args()
    settings = {"ORCHESTRA_RATE_PER_SECOND": "1000000", "ORCHESTRA_RATE_BURST": "1000000"}
    with own_server(settings) as url:
        report = asyncio.run(measure(url, args.players, args.placements, args.seed))
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['players']} players, {report['placements']} placements (seed {report['seed']}), bytes:")
    print("view mode  placement median  largest  last  end of game")
    for mode in MODES:
        row = report[mode]
        print(
            f"{mode:<9} {row['placement_median']:>17} {row['placement_max']:>8} {row['placement_last']:>5}"
            f" {row['end']:>12}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
