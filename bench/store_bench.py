"""Our Redis event store against a bare Lua conditional append, and the cost of reading games back.

    python -m bench.store_bench [--quick] [--out PATH]

On its own redis-server (a free loopback port, appendonly no, so the client and script costs show
rather than the disk's) it measures, in one run:

- appends/s of a minimal Lua compare-and-XADD script, called with EVALSHA on one connection, sequentially;
- appends/s of `RedisEventStore.append` (sequential, one ~300-byte envelope per command, with the
  idempotency record, the existence check and error translation that the minimal script lacks);
- events/s of reading stored games: a raw XRANGE, `RedisEventStore.read`, and read + `envelope.decode` +
  `projections.project` (games decided by the real rules, wrapped in real envelopes).

It prints a table and writes the rates and the ratios (ours / raw) as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from redis.asyncio import Redis

from bench.common import RedisServer, machine
from domain import (
    STANDARD,
    Command,
    CreateGame,
    Event,
    Game,
    PerformanceToken,
    Place,
    Rejected,
    RepairToken,
    decide,
    evolve,
    legal_spaces,
)
from domain.messages import Token
from projections import project
from server.protocol.envelope import GENESIS, Envelope, chain_hash, decode, encode
from server.store import Append, Appended
from server.store.redis import RedisEventStore

RESULT = Path(__file__).resolve().parent / "results" / "store_bench.json"

MINIMAL_APPEND = """
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local version = #top > 0 and tonumber(string.match(top[1][1], '-(%d+)$')) or 0
if version ~= tonumber(ARGV[1]) then return redis.error_reply('CONFLICT ' .. version) end
redis.call('XADD', KEYS[1], '0-' .. (version + 1), 'e', ARGV[2])
return version + 1
"""


def _tokens() -> list[Token]:
    eras = [PerformanceToken(era=era) for era in ("baroque", "classical", "romantic")]
    return [*eras, *(RepairToken(family=f) for f in ("strings", "winds", "percussion_keyboards"))]


def build_game(game_id: str, placements: int, players: int = 4) -> list[bytes]:
    """The stored envelopes of a game decided by the real rules: its creation, then placements in turn."""
    state, datas, prev = Game(), [], GENESIS
    commands: list[Command] = [CreateGame(game_id=game_id, players=tuple(f"P{i}" for i in range(players)))]
    moves = itertools.product(_tokens(), range(8))
    for n, (token, pick) in zip(range(placements), itertools.cycle(moves), strict=False):
        spaces = legal_spaces(STANDARD, token)
        commands.append(Place(seat=n % players, id=f"c{n}", token=token, space=spaces[pick % len(spaces)]))
    for command in commands:
        try:
            events: list[Event] = decide(state, command)
        except Rejected:
            continue
        for event in events:
            state = evolve(state, event)
            seat = getattr(command, "seat", None)
            envelope = Envelope(
                game_id, state.version, "2026-01-01T12:00:00.000Z", None, seat, event, prev=prev
            )
            data = encode(envelope)
            datas.append(data)
            prev = chain_hash(data)
    return datas


async def _rate(seconds: float, step: Callable[[], Awaitable[int]]) -> float:
    """Units per second of `step` (which returns how many units it did), run for about `seconds`."""
    done, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        done += await step()
    return done / elapsed


async def measure(url: str, quick: bool) -> dict[str, Any]:
    """Every rate of the module docstring, on the redis-server at `url`."""
    seconds, games, placements = (0.3, 3, 60) if quick else (4.0, 20, 200)
    payloads = build_game("payload", 40)[1:]
    raw = Redis.from_url(url, max_connections=1)
    store = await RedisEventStore.from_url(url, cluster=False)
    try:
        sha = await raw.script_load(MINIMAL_APPEND)
        raw_key, raw_version = f"bench:{{{uuid.uuid4().hex}}}:raw", 0

        async def raw_append() -> int:
            nonlocal raw_version
            payload = payloads[raw_version % len(payloads)]
            raw_version = int(await raw.evalsha(sha, 1, raw_key, raw_version, payload))
            return 1

        game_id, version = f"bench-{uuid.uuid4().hex}", 1
        await store.create(game_id, build_game(game_id, 0)[0], {"seat:0": "x"})

        async def our_append() -> int:
            nonlocal version
            (appended,) = await store.append_many(
                [Append(game_id, version, [payloads[version % len(payloads)]], f"k{version}")]
            )
            assert isinstance(appended, Appended), appended
            version = appended.last
            return 1

        raw_appends = await _rate(seconds, raw_append)
        our_appends = await _rate(seconds, our_append)
        stored = await _store_games(store, games, placements)
        events = sum(len(datas) for datas in stored.values())
        keys = [f"orchestra:{{{gid}}}:events" for gid in stored]

        async def raw_read() -> int:
            return sum([len(cast(list[Any], await raw.xrange(key))) for key in keys])

        async def our_read() -> int:
            return sum([len(await store.read(gid)) for gid in stored])

        async def read_fold() -> int:
            for gid in stored:
                project(decode(record.data).event for record in await store.read(gid))
            return events

        rates = {
            "raw_lua_appends_per_s": raw_appends,
            "store_appends_per_s": our_appends,
            "raw_xrange_events_per_s": await _rate(seconds, raw_read),
            "store_read_events_per_s": await _rate(seconds, our_read),
            "read_decode_fold_events_per_s": await _rate(seconds, read_fold),
        }
    finally:
        await store.close()
        await raw.aclose()
    envelope_bytes = sum(map(len, payloads)) / len(payloads)
    return {
        "quick": quick,
        "games": games,
        "events_per_game": events // games,
        "mean_envelope_bytes": round(envelope_bytes),
        "rates": rates,
        "ratios": {
            "append_ours_over_raw": rates["store_appends_per_s"] / rates["raw_lua_appends_per_s"],
            "read_ours_over_raw": rates["store_read_events_per_s"] / rates["raw_xrange_events_per_s"],
            "read_fold_over_raw": rates["read_decode_fold_events_per_s"] / rates["raw_xrange_events_per_s"],
        },
    }


async def _store_games(store: RedisEventStore, games: int, placements: int) -> dict[str, list[bytes]]:
    stored: dict[str, list[bytes]] = {}
    for _ in range(games):
        game_id = f"bench-{uuid.uuid4().hex}"
        datas = build_game(game_id, placements)
        await store.create(game_id, datas[0], {})
        for version, data in enumerate(datas[1:], start=1):
            (appended,) = await store.append_many([Append(game_id, version, [data], f"c{version}")])
            assert isinstance(appended, Appended), appended
        stored[game_id] = datas
    return stored


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table and write the JSON result."""
    parser = argparse.ArgumentParser(prog="python -m bench.store_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a CI-sized run (a few seconds)")
    parser.add_argument("--out", type=Path, default=RESULT, help=f"the JSON result (default {RESULT})")
    args = parser.parse_args(argv)
    with RedisServer() as server:
        result = asyncio.run(measure(server.url, args.quick))
    result = {"benchmark": "store_bench", "durability": server.durability, "machine": machine(), **result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'measure':34} {'per second':>12}")
    for name, rate in result["rates"].items():
        print(f"{name:34} {rate:12,.0f}")
    for name, value in result["ratios"].items():
        print(f"{name:34} {value:12.2f}")
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
