"""The table workload: ours against the minimal pipeline, tables of players in turn, and interference.

`--tables` tables play at once, each 3 players and 3 spectators, all with the default hello (no `view`
field). Players place in turn (seat 0, 1, 2, 0, ...), each waiting for its `accepted` answer before the
next one sends; after `--placements` placements the table creates a new game (POST /games, 6 websockets,
6 hellos, all inside the measured time) and plays on. Placements cycle through legal performance and
repair placements of the standard layout, as bench/games.py places them.

Per command the meter takes the time from its send until every client of its table has it: the sender's
`accepted` answer and an `events` frame holding its envelope (matched by command id and seat) at each of
the 5 other clients. Rounds alternate the servers (ours, minimal, then ours under interference), each run
on a fresh server process, all on one redis-server of their own.

Interference, on ours only, from a process of its own: a late spectator reads the whole history of a
game of `--long-game` events (a websocket hello with `"since": 0`, then GET /games/{id}/events, in
turn, one read every `--late-every` seconds), while `--cold-games` games the server has never held
(played before it starts, through a server process of their own on the same Redis) are loaded by
GET /games/{id}, spread over the run. With `--interference-control`, each round also runs ours with the
same interference aimed at a second server process on the same Redis: the machine carries the same
extra work, the tables' server none of it, so the two tell what the interference costs the server from
what it costs the machine (on a small machine, the larger part).

With `--signing-baseline`, the minimal pipeline signs every envelope as ours does: what ours costs
beyond it is everything but the signature. With `--stagger S`, table i plays its first game S * i seconds
after the first table: the tables' games no longer start together (they do by default, all tables
starting at once with games of one length). With `--before TREE`, each round also runs ours as another
checkout has it (a worktree of an earlier commit), without interference: what a change did to ours.

After each run of ours, its games' streams are read back: how many envelopes a signed checkpoint held
(one checkpoint per turn of the server's loop that sealed any).

    python -m bench load [--rounds 3] [--duration 20] [--tables 12] [--late-every 1] [--no-interference]
                         [--signing-baseline] [--stagger 0.04] [--interference-control] [--before TREE]
    python -m bench load --quick

With `--ack-levels`, the cost of each acknowledgement level (ORCHESTRA_ACK) instead: ours alone, no
interference, on a primary with one replica (both on this machine), one run per level in each round, the
order rotating: `primary`, `replica`, and `replica_fsync` where the redis-server is 7.2 or later (WAITAOF;
the pair then keeps an append-only file, fsynced every second, for every level). Reported: each level's
throughput and p99, and their ratios to `primary` (bench/results/load_ack*.json).

    python -m bench load --ack-levels [--rounds 3] [--duration 20] [--tables 12] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import multiprocessing as mp
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import msgspec
import websockets
from redis import Redis

from bench.common import (
    ROOT,
    CpuMeter,
    RedisServer,
    ServerProcess,
    percentiles,
    raise_nofile,
    ratio,
    say,
    write_result,
)
from bench.generator import placements, timed_part
from bench.light_client import LightSocket
from server.ops.embedded_redis import find_redis_server
from server.protocol.envelope import decode_proof, split_proof
from server.store.redis.keys import FIELD, events_key
from tests.support.redis import RedisProcess, start_replicated

ANSWER_TIMEOUT = 10.0
# How long a table waits, at the end of a game, for its last command's frames before it moves on.
SETTLE_SECONDS = 2.0
GOALS = {"throughput_min": 1.0, "p99_max": 1.1, "cpu_per_command_max": 1.0, "interference_p99_max": 1.2}


@dataclass
class TableConfig:
    """One run of the table workload against one server."""

    url: str = ""
    tables: int = 12
    players: int = 3
    spectators: int = 3
    placements: int = 120
    duration: float = 20.0
    server_pid: int | None = None
    redis_pid: int | None = None
    tag: str = "r0"
    # Seconds between two tables' first games. At 0 every table starts at once, and since their games
    # take about as long, the tables' later games start together too.
    stagger: float = 0.0


# A game's first placements, whose latency is reported apart: they meet the work of starting games.
EARLY_PLACEMENTS = 10


class Pending:
    """A command in flight: when it was sent, by which seat, its place in its game, and who has it so far."""

    __slots__ = ("sent", "seat", "index", "accepted", "others", "future")

    def __init__(self, sent: float, seat: int, index: int, future: asyncio.Future[bool]) -> None:
        self.sent, self.seat, self.index, self.future = sent, seat, index, future
        self.accepted = False
        self.others = 0


class Tables:
    """The meter: every table of one run, in one process."""

    def __init__(self, config: TableConfig) -> None:
        self.config = config
        self.bodies = placements()
        self.others = config.players + config.spectators - 1
        self.pending: dict[str, Pending] = {}
        self.placed: list[tuple[float, int]] = []  # every complete command: its latency and its place
        self.ack: list[float] = []
        self.accepted = 0
        self.sent = 0
        self.rejected: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.games = 0
        self.game_ids: list[str] = []
        self.game_setup: list[float] = []
        self.last_done = 0.0

    def _error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def _done(self, cid: str, item: Pending, now: float) -> None:
        if item.accepted and item.others >= self.others:
            latency = now - item.sent
            self.placed.append((latency, item.index))
            self.last_done = now
            del self.pending[cid]

    async def _read(self, ws: LightSocket, seat: int) -> None:
        pending = self.pending
        clock = time.perf_counter
        try:
            while True:
                data = cast(bytes, await ws.recv(decode=False))
                now = clock()
                if data.startswith(b'{"type":"events"'):
                    for env in timed_part(data).envelopes:
                        item = pending.get(env.command_id) if env.command_id is not None else None
                        # The sender counts by its answer; its own copy of the frame is not awaited.
                        if item is not None and item.seat == env.seat and seat != env.seat:
                            item.others += 1
                            self._done(cast(str, env.command_id), item, now)
                    continue
                frame = timed_part(data)
                item = pending.get(frame.id) if frame.id is not None else None
                if item is None:
                    continue
                if frame.type == "accepted":
                    self.accepted += 1
                    self.ack.append(now - item.sent)
                    item.accepted = True
                    if not item.future.done():
                        item.future.set_result(True)
                    self._done(cast(str, frame.id), item, now)
                elif frame.type == "rejected":
                    code = frame.code or "?"
                    self.rejected[code] = self.rejected.get(code, 0) + 1
                    del pending[cast(str, frame.id)]
                    if not item.future.done():
                        item.future.set_result(False)
        except websockets.ConnectionClosed:
            pass
        except Exception:
            self._error("read")

    async def play_game(self, http: httpx.AsyncClient, ws_base: str, table: int, deadline: float) -> None:
        """One game at table `table`: create it, connect and greet its clients, place until its last
        placement or `deadline`, and close; every command is metered."""
        config, clock = self.config, time.perf_counter
        loop = asyncio.get_running_loop()
        started = clock()
        response = await http.post("/games", json={"players": [f"P{i}" for i in range(config.players)]})
        response.raise_for_status()
        created = response.json()
        game_id, number = created["game_id"], self.games
        self.games += 1
        self.game_ids.append(game_id)
        url = f"{ws_base}/games/{game_id}/ws"
        tokens: list[tuple[str | None, int]] = [(s["token"], s["seat"]) for s in created["seats"]]
        tokens += [(None, -1)] * config.spectators

        async def join(token: str | None) -> LightSocket:
            ws = await LightSocket.connect(url)
            await ws.send(msgspec.json.encode({"type": "hello", "token": token, "since": None}).decode())
            welcome = timed_part(cast(bytes, await asyncio.wait_for(ws.recv(decode=False), 30)))
            if welcome.type != "welcome":
                raise RuntimeError(f"no welcome: {welcome}")
            return ws

        sockets = await asyncio.gather(*(join(token) for token, _ in tokens))
        readers = [
            asyncio.create_task(self._read(ws, seat)) for ws, (_, seat) in zip(sockets, tokens, strict=True)
        ]
        self.game_setup.append(clock() - started)
        players = sockets[: config.players]
        try:
            for index in range(config.placements):
                if clock() >= deadline:
                    break
                seat = index % config.players
                cid = f"{config.tag}t{table}g{number}n{index}"
                body = self.bodies[(index * 7 + seat) % len(self.bodies)]
                item = Pending(clock(), seat, index, loop.create_future())
                self.pending[cid] = item
                self.sent += 1
                await players[seat].send(f'{{"type":"place","id":"{cid}",{body}}}')
                try:
                    await asyncio.wait_for(item.future, ANSWER_TIMEOUT)
                except TimeoutError:
                    self._error("answer_timeout")
            settle = clock() + SETTLE_SECONDS
            prefix = f"{config.tag}t{table}g{number}n"
            while clock() < settle and any(cid.startswith(prefix) for cid in self.pending):
                await asyncio.sleep(0.005)
        finally:
            for task in readers:
                task.cancel()
            await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
            await asyncio.gather(*readers, return_exceptions=True)

    async def _table(self, http: httpx.AsyncClient, ws_base: str, table: int, deadline: float) -> None:
        if self.config.stagger:
            await asyncio.sleep(table * self.config.stagger)
        while time.perf_counter() < deadline:
            try:
                await self.play_game(http, ws_base, table, deadline)
            except Exception as exc:
                self._error(f"game:{type(exc).__name__}")
                await asyncio.sleep(0.1)

    async def run(self) -> dict[str, Any]:
        config = self.config
        base = config.url.rstrip("/")
        ws_base = base.replace("http://", "ws://")
        server = CpuMeter(config.server_pid) if config.server_pid else None
        redis_meter = CpuMeter(config.redis_pid) if config.redis_pid else None
        limits = httpx.Limits(max_connections=config.tables, max_keepalive_connections=config.tables)
        async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as http:
            for meter in (server, redis_meter):
                if meter:
                    meter.start()
            cpu0 = time.process_time()
            started = time.perf_counter()
            deadline = started + config.duration
            await asyncio.gather(*(self._table(http, ws_base, t, deadline) for t in range(config.tables)))
            ended = time.perf_counter()
            generator_cpu = time.process_time() - cpu0
            server_cpu = server.stop() if server else {}
            redis_cpu = redis_meter.stop() if redis_meter else {}
        elapsed = ended - started
        accepted = self.accepted
        return {
            "server_kind": "",
            "game_ids": self.game_ids,
            "sent": self.sent,
            "accepted": accepted,
            "rejected": self.rejected,
            "errors": self.errors,
            "incomplete": len(self.pending),
            "games_started": self.games,
            "elapsed_s": elapsed,
            "commands_per_s": accepted / elapsed if elapsed else 0.0,
            "all_clients_ms": percentiles([latency for latency, _ in self.placed]),
            # The first EARLY_PLACEMENTS placements of each game, and the others.
            "first_placements_ms": percentiles([t for t, index in self.placed if index < EARLY_PLACEMENTS]),
            "later_placements_ms": percentiles([t for t, index in self.placed if index >= EARLY_PLACEMENTS]),
            "slowest_percent": slowest_percent(self.placed, self.config.placements),
            "ack_ms": percentiles(self.ack),
            "game_setup_ms": percentiles(self.game_setup),
            "server_cpu": server_cpu,
            "cpu_us_per_command": server_cpu.get("cpu_seconds", 0.0) / accepted * 1e6 if accepted else 0.0,
            "system_cpu_us_per_command": (
                server_cpu.get("system_seconds", 0.0) / accepted * 1e6 if accepted else 0.0
            ),
            "redis_cpu": redis_cpu,
            "generator": {
                "cpu_seconds": generator_cpu,
                "core_share": generator_cpu / elapsed if elapsed else 0.0,
            },
        }


def slowest_percent(placed: list[tuple[float, int]], placements: int) -> dict[str, float]:
    """Where the slowest 1% of commands fall in their games: the shares in a game's first and in its
    last EARLY_PLACEMENTS placements, and the share each span holds of all commands (what the slowest
    would show if where a command falls in its game made no difference)."""
    if not placed:
        return {"in_first": 0.0, "in_last": 0.0, "span_share": 0.0}
    ordered = sorted(placed, reverse=True)
    slowest = ordered[: max(1, len(ordered) // 100)]
    last_from = max(EARLY_PLACEMENTS, placements - EARLY_PLACEMENTS)
    return {
        "in_first": sum(1 for _, index in slowest if index < EARLY_PLACEMENTS) / len(slowest),
        "in_last": sum(1 for _, index in slowest if index >= last_from) / len(slowest),
        "span_share": min(1.0, EARLY_PLACEMENTS / placements),
    }


def run_tables(config: TableConfig) -> dict[str, Any]:
    """One run of the tables against `config.url`, on uvloop, the meter's cyclic GC off while it runs
    (its pauses would show as the server's latency)."""
    import uvloop

    gc.collect()
    gc.disable()
    try:
        return uvloop.run(Tables(config).run())
    finally:
        gc.enable()
        gc.collect()


# --- interference ------------------------------------------------------------------------------------


async def _late_reads(base: str, game_id: str, version: int, stop: float, every: float) -> dict[str, Any]:
    """Read the long game's whole history, by websocket and by HTTP in turn, one read every `every`
    seconds (back to back when 0), until `stop`."""
    times: dict[str, list[float]] = {"websocket": [], "http": []}
    errors = 0
    url = f"{base.replace('http://', 'ws://')}/games/{game_id}/ws"
    hello = msgspec.json.encode({"type": "hello", "token": None, "since": 0}).decode()
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        turn = 0
        next_at = time.time()
        # Both bounds: with `every` 0 the schedule never moves, and no read starts past the end.
        while next_at < stop and time.time() < stop:
            await asyncio.sleep(max(0.0, next_at - time.time()))
            next_at += every
            started = time.perf_counter()
            try:
                if turn % 2 == 0:
                    ws = await LightSocket.connect(url)
                    try:
                        await ws.send(hello)
                        seen = 0
                        while seen < version:
                            frame = timed_part(cast(bytes, await asyncio.wait_for(ws.recv(decode=False), 60)))
                            if frame.type == "welcome":
                                continue
                            if frame.envelopes:
                                seen = frame.envelopes[-1].version
                    finally:
                        await ws.close()
                    times["websocket"].append(time.perf_counter() - started)
                else:
                    lines = 0
                    async with http.stream("GET", f"/games/{game_id}/events") as response:
                        response.raise_for_status()
                        async for chunk in response.aiter_bytes():
                            lines += chunk.count(b"\n")
                    if lines < version:
                        raise RuntimeError(f"{lines} envelopes of {version}")
                    times["http"].append(time.perf_counter() - started)
            except Exception:
                errors += 1
                await asyncio.sleep(0.1)
            turn += 1
    return {
        "reads": {kind: len(samples) for kind, samples in times.items()},
        "read_ms": {kind: percentiles(samples) for kind, samples in times.items()},
        "errors": errors,
    }


async def _cold_loads(base: str, game_ids: list[str], start: float, stop: float) -> dict[str, Any]:
    """GET /games/{id} of each cold game, spread evenly from `start` to `stop`."""
    times: list[float] = []
    errors = 0
    gap = (stop - start) * 0.9 / max(1, len(game_ids))
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for index, game_id in enumerate(game_ids):
            wait = start + index * gap - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if time.time() >= stop:
                break
            started = time.perf_counter()
            try:
                response = await http.get(f"/games/{game_id}")
                response.raise_for_status()
                times.append(time.perf_counter() - started)
            except Exception:
                errors += 1
    return {"loaded": len(times), "load_ms": percentiles(times), "errors": errors}


async def _interfere(base: str, seeded: dict[str, Any], start: float, stop: float) -> dict[str, Any]:
    await asyncio.sleep(max(0.0, start - time.time()))
    cpu0 = time.process_time()
    late, cold = await asyncio.gather(
        _late_reads(base, seeded["long_game"], seeded["long_version"], stop, seeded["late_every"]),
        _cold_loads(base, seeded["cold_games"], start, stop),
    )
    return {"late_spectator": late, "cold_games": cold, "cpu_seconds": time.process_time() - cpu0}


def _interference_child(base: str, seeded: dict[str, Any], start: float, stop: float, queue: Any) -> None:
    import uvloop

    try:
        queue.put(("ok", uvloop.run(_interfere(base, seeded, start, stop))))
    except BaseException as exc:  # reported to the parent
        queue.put(("error", repr(exc)))


# --- seeding -----------------------------------------------------------------------------------------


async def _play(base: str, events: int, bodies: list[str]) -> tuple[str, int]:
    """A new game played over the wire to `events` events, seats in turn, each answer awaited."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        response = await http.post("/games", json={"players": ["P0", "P1", "P2"]})
        response.raise_for_status()
        created = response.json()
    game_id = created["game_id"]
    url = f"{base.replace('http://', 'ws://')}/games/{game_id}/ws"
    sockets = []
    try:
        for seat in created["seats"]:
            ws = await LightSocket.connect(url)
            sockets.append(ws)
            hello = {"type": "hello", "token": seat["token"], "since": None, "view": False}
            await ws.send(msgspec.json.encode(hello).decode())
            await asyncio.wait_for(ws.recv(decode=False), 30)
        version = 1
        for index in range(events - 1):
            seat = index % len(sockets)
            body = bodies[(index * 7 + seat) % len(bodies)]
            await sockets[seat].send(f'{{"type":"place","id":"s{index}",{body}}}')
            while True:
                frame = timed_part(cast(bytes, await asyncio.wait_for(sockets[seat].recv(decode=False), 30)))
                if frame.id == f"s{index}" and frame.type in ("accepted", "rejected"):
                    break
            if frame.type == "accepted":
                version += 1
        return game_id, version
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)


async def _seed_games(base: str, long_events: int, cold_games: int, cold_events: int) -> dict[str, Any]:
    bodies = placements()
    long_game, long_version = await _play(base, long_events, bodies)
    gate = asyncio.Semaphore(32)

    async def cold() -> str:
        async with gate:
            return (await _play(base, cold_events, bodies))[0]

    cold_ids = await asyncio.gather(*(cold() for _ in range(cold_games)))
    return {"long_game": long_game, "long_version": long_version, "cold_games": list(cold_ids)}


def seed(redis: RedisServer, long_events: int, cold_games: int, cold_events: int) -> dict[str, Any]:
    """The long game and the cold games, played through a server process of their own that is gone
    before any measured server starts: none of them is held in the measured server's memory."""
    import uvloop

    with ServerProcess("ours", redis.url) as server:
        seeded = uvloop.run(_seed_games(server.url.rstrip("/"), long_events, cold_games, cold_events))
    seeded["cold_events"] = cold_events
    return seeded


# --- rounds ------------------------------------------------------------------------------------------


def one_run(
    kind: str,
    redis: RedisServer | ReplicatedRedis,
    config: TableConfig,
    seeded: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
    control: bool = False,
    tree: Path = ROOT,
) -> dict[str, Any]:
    """Start server `kind` of checkout `tree` on `redis` (with `env` added to its environment and `args`
    to its command line), run the tables (with interference when `seeded`: at that server, or with
    `control` at a second server of ours on the same Redis), stop it."""
    with contextlib.ExitStack() as servers:
        server = servers.enter_context(ServerProcess(kind, redis.url, env=env, args=args, tree=tree))
        target = servers.enter_context(ServerProcess("ours", redis.url)) if control else server
        run_config = TableConfig(**{**asdict(config), "url": server.url, "server_pid": server.pid})
        run_config.redis_pid = redis.pid
        child = queue = None
        if seeded is not None:
            context = mp.get_context("spawn")
            queue = context.Queue()
            # The child needs a moment to start Python; the tables and the interference begin together.
            start = time.time() + 3.0
            child = context.Process(
                target=_interference_child,
                args=(target.url.rstrip("/"), seeded, start, start + config.duration, queue),
                daemon=True,
            )
            child.start()
            time.sleep(max(0.0, start - time.time()))
        result = run_tables(run_config)
        result["server_kind"] = kind
        game_ids = result.pop("game_ids")
        if kind == "ours":
            result["checkpoints"] = checkpoint_counts(redis.url, game_ids)
        if child is not None and queue is not None:
            status, payload = queue.get(timeout=config.duration + 120)
            child.join(10)
            if status != "ok":
                raise RuntimeError(f"the interference failed: {payload}")
            result["interference"] = payload | {"at": "this server" if target is server else "another server"}
        return result


def checkpoint_counts(url: str, game_ids: Sequence[str]) -> dict[str, Any]:
    """How the envelopes of a run's games were signed, read back from their streams: the envelopes, the
    distinct checkpoints their proofs name (one per turn of the server's loop that sealed any of them),
    the envelopes signed alone, and the mean envelopes a checkpoint held (its tree's size)."""
    sizes: dict[tuple[str, str], int] = {}
    envelopes = alone = 0
    with Redis.from_url(url) as client:
        for game_id in game_ids:
            for _, fields in client.xrange(events_key(game_id)):
                envelopes += 1
                split = split_proof(fields[FIELD])
                if split is None:
                    alone += 1
                    continue
                proof = decode_proof(split[1])
                sizes[(proof.root, proof.sig)] = proof.size
    return {
        "envelopes": envelopes,
        "checkpoints": len(sizes),
        "signed_alone": alone,
        "envelopes_per_checkpoint": statistics.mean(sizes.values()) if sizes else 0.0,
        "largest_checkpoint": max(sizes.values(), default=0),
    }


# A way to run a server in `rotated_runs`: what its environment gets, and its command-line options.
Mode = tuple[dict[str, str], list[str]]


def add_rotation_arguments(parser: argparse.ArgumentParser, sets: str, sets_help: str) -> None:
    """The options of a benchmark built on `rotated_runs`: `--<sets>` sets of runs, their length, tables."""
    parser.add_argument("--quick", action="store_true", help=f"CI size: 1 of the {sets}, 2 s runs, 4 tables")
    parser.add_argument(f"--{sets}", type=int, default=6, help=sets_help)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each run")
    parser.add_argument("--tables", type=int, default=12)


def rotation_config(args: argparse.Namespace, sets: str) -> TableConfig:
    """The tables of a benchmark built on `rotated_runs` (made CI size with --quick)."""
    raise_nofile()
    if args.quick:
        setattr(args, sets, 1)
        args.duration, args.tables = 2.0, 4
    return TableConfig(tables=args.tables, duration=args.duration)


def rotated_runs(
    kind: str,
    config: TableConfig,
    modes: dict[str, Mode],
    count: int,
    name: str,
    on: ReplicatedRedis | None = None,
) -> list[dict[str, Any]]:
    """`count` sets of runs of server `kind` on the tables of `config`, one run per mode, on one Redis
    (`on`, or a RedisServer of its own); the order rotates from one set to the next (these machines
    drift: whichever runs last in every set would otherwise be favoured). Each set maps a mode to its
    run's result."""
    order = list(modes)
    sets: list[dict[str, Any]] = []
    with contextlib.nullcontext(on) if on is not None else RedisServer() as redis:
        for index in range(count):
            runs: dict[str, Any] = {}
            first = index % len(order)
            for mode in order[first:] + order[:first]:
                env, args = modes[mode]
                config.tag = f"{name[0]}{index}m{order.index(mode)}"
                runs[mode] = one_run(kind, redis, config, env=env, args=args)
                say(f"{name} {index + 1} " + brief(mode, runs[mode]))
            sets.append(runs)
    return sets


def brief(label: str, result: dict[str, Any]) -> str:
    """One line of a run."""
    lat, slow = result["all_clients_ms"], result["slowest_percent"]
    core = result["server_cpu"].get("core_share", 0)
    return (
        f"{label}: {result['commands_per_s']:.0f} cmd/s, "
        f"all clients p50/p99 {lat['p50']:.2f}/{lat['p99']:.2f} ms "
        f"(p50 of a game's first {EARLY_PLACEMENTS} placements {result['first_placements_ms']['p50']:.2f}, "
        f"of the later ones {result['later_placements_ms']['p50']:.2f}; of the slowest 1%, "
        f"{slow['in_first']:.0%} in a game's first {EARLY_PLACEMENTS} and {slow['in_last']:.0%} in its last "
        f"{EARLY_PLACEMENTS}, spans of {slow['span_share']:.0%} of all), "
        f"server {result['cpu_us_per_command']:.0f} us/cmd ({result['system_cpu_us_per_command']:.0f} of "
        f"it in the kernel; {core:.2f} core), "
        f"generator {result['generator']['core_share']:.2f} core, games {result['games_started']}, "
        f"rejected {result['rejected']}, errors {result['errors']}, incomplete {result['incomplete']}"
        + _signed_brief(result.get("checkpoints"))
    )


def _signed_brief(counts: dict[str, Any] | None) -> str:
    if not counts:
        return ""
    if not counts["checkpoints"]:
        return "; every envelope signed alone"
    return f"; {counts['envelopes_per_checkpoint']:.1f} envelopes a checkpoint"


def _medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "commands_per_s": statistics.median(r["commands_per_s"] for r in runs),
        "p50_ms": statistics.median(r["all_clients_ms"]["p50"] for r in runs),
        "p99_ms": statistics.median(r["all_clients_ms"]["p99"] for r in runs),
        "first_placements_p50_ms": statistics.median(r["first_placements_ms"]["p50"] for r in runs),
        "later_placements_p50_ms": statistics.median(r["later_placements_ms"]["p50"] for r in runs),
        "slowest_in_first": statistics.median(r["slowest_percent"]["in_first"] for r in runs),
        "slowest_in_last": statistics.median(r["slowest_percent"]["in_last"] for r in runs),
        "cpu_us_per_command": statistics.median(r["cpu_us_per_command"] for r in runs),
        "system_cpu_us_per_command": statistics.median(r["system_cpu_us_per_command"] for r in runs),
        "generator_core_share": statistics.median(r["generator"]["core_share"] for r in runs),
    }


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds, the ratios ours/minimal and the goals."""
    ours = _medians([r["ours"] for r in rounds])
    minimal = _medians([r["minimal"] for r in rounds])
    ratios = {
        "throughput": ratio(ours["commands_per_s"], minimal["commands_per_s"]),
        "p99": ratio(ours["p99_ms"], minimal["p99_ms"]),
        "cpu_per_command": ratio(ours["cpu_us_per_command"], minimal["cpu_us_per_command"]),
    }
    summary: dict[str, Any] = {
        "ours": ours,
        "minimal": minimal,
        "ratios": ratios,
        "goals": GOALS,
        "goals_met": {
            "throughput": ratios["throughput"] >= GOALS["throughput_min"],
            "p99": ratios["p99"] <= GOALS["p99_max"],
            "cpu_per_command": ratios["cpu_per_command"] <= GOALS["cpu_per_command_max"],
        },
    }
    earlier = [r["ours_before"] for r in rounds if "ours_before" in r]
    if earlier:
        before = _medians(earlier)
        summary["before"] = before
        summary["ratios_to_before"] = {
            "throughput": ratio(ours["commands_per_s"], before["commands_per_s"]),
            "p99": ratio(ours["p99_ms"], before["p99_ms"]),
            "cpu_per_command": ratio(ours["cpu_us_per_command"], before["cpu_us_per_command"]),
        }
    signed = [r["ours"]["checkpoints"] for r in rounds if "checkpoints" in r["ours"]]
    if signed:
        envelopes, checkpoints = sum(c["envelopes"] for c in signed), sum(c["checkpoints"] for c in signed)
        alone = sum(c["signed_alone"] for c in signed)
        summary["checkpoints"] = {
            "envelopes": envelopes,
            "checkpoints": checkpoints,
            "signed_alone": alone,
            "envelopes_per_checkpoint": ratio(envelopes - alone, checkpoints),
            "largest_checkpoint": max(c["largest_checkpoint"] for c in signed),
        }
    loaded = [r["ours_interference"] for r in rounds if "ours_interference" in r]
    if loaded:
        with_p99 = statistics.median(r["all_clients_ms"]["p99"] for r in loaded)
        increase = ratio(with_p99, ours["p99_ms"])
        summary["interference"] = {
            "p99_without_ms": ours["p99_ms"],
            "p99_with_ms": with_p99,
            "p99_ratio": increase,
            "commands_per_s_with": statistics.median(r["commands_per_s"] for r in loaded),
            "late_reads": sum(sum(r["interference"]["late_spectator"]["reads"].values()) for r in loaded),
            "cold_loads": sum(r["interference"]["cold_games"]["loaded"] for r in loaded),
        }
        summary["goals_met"]["interference"] = increase <= GOALS["interference_p99_max"]
        control = [r["ours_control"] for r in rounds if "ours_control" in r]
        if control:
            control_p99 = statistics.median(r["all_clients_ms"]["p99"] for r in control)
            summary["interference"]["p99_control_ms"] = control_p99
            summary["interference"]["p99_control_ratio"] = ratio(control_p99, ours["p99_ms"])
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="CI size: 1 round of 3 s, 4 tables, small interference"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one run per server")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of each run")
    parser.add_argument("--tables", type=int, default=12, help="tables playing at once")
    parser.add_argument("--placements", type=int, default=120, help="placements a game, then a new game")
    parser.add_argument("--no-interference", dest="interference", action="store_false")
    parser.add_argument("--long-game", type=int, default=10_000, help="events of the late spectator's game")
    parser.add_argument(
        "--late-every", type=float, default=1.0, help="seconds between two history reads (0: back to back)"
    )
    parser.add_argument("--cold-games", type=int, default=500, help="games loaded cold during each run")
    parser.add_argument("--cold-events", type=int, default=30, help="events of each cold game")
    parser.add_argument(
        "--signing-baseline",
        action="store_true",
        help="the minimal pipeline signs every envelope as ours does (bench.minimal --sign)",
    )
    parser.add_argument(
        "--interference-control",
        action="store_true",
        help="each round also runs ours with the interference aimed at a second server process on the same "
        "Redis: what it costs the machine rather than the server",
    )
    parser.add_argument(
        "--ack-levels",
        action="store_true",
        help="the cost of each ORCHESTRA_ACK level instead: ours on a primary with a replica, one run per "
        "level a round, rotated (--rounds, --duration, --tables apply; no interference)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="TREE",
        help="each round also runs ours as this checkout has it (a worktree of an earlier commit: git "
        "worktree add /tmp/before <commit>), as ours_before, without interference",
    )
    parser.add_argument(
        "--stagger",
        type=float,
        default=0.0,
        help="seconds between two tables' first games (0: every table starts at once, and their games "
        "keep starting together)",
    )


# What the workload docs/performance.md reports (and `python -m bench plot` draws) is made of: its runs,
# with these at their defaults, write load.json.
_DOCUMENTED = (
    "tables",
    "placements",
    "duration",
    "rounds",
    "interference",
    "interference_control",
    "signing_baseline",
    "stagger",
)


def result_name(args: argparse.Namespace) -> str:
    """ "load" for the documented workload (or --quick); for another, a name of its own that says how it
    differs (load_placements3.json), so that trying a variant never replaces the figures the plot draws."""
    if args.quick:
        return "load"
    defaults = argparse.ArgumentParser()
    add_arguments(defaults)
    changed = [
        (key, getattr(args, key)) for key in _DOCUMENTED if getattr(args, key) != defaults.get_default(key)
    ]
    before = ["before"] if args.before is not None else []
    if not changed and not before:
        return "load"
    return "load_" + "_".join(
        [f"{key}{value:g}" if isinstance(value, float) else f"{key}{value}" for key, value in changed]
        + before
    )


def server_args(kind: str, args: argparse.Namespace) -> list[str]:
    """The command-line options a run's server gets: the minimal one signs with --signing-baseline."""
    return ["--sign"] if kind == "minimal" and args.signing_baseline else []


def main(args: argparse.Namespace, argv: list[str]) -> int:
    if args.ack_levels:
        return ack_main(args, argv)
    if args.before is not None and not (args.before / "server" / "ops" / "cli.py").is_file():
        raise SystemExit(f"bench load: {args.before} is not a checkout of this project")
    if args.interference_control and not args.interference:
        raise SystemExit("bench load: --interference-control aims the interference elsewhere; it needs one")
    raise_nofile()
    if args.quick:
        args.rounds, args.duration, args.tables = 1, 3.0, 4
        args.long_game, args.cold_games, args.cold_events, args.late_every = 1_000, 40, 10, 0.5
    config = TableConfig(
        tables=args.tables, placements=args.placements, duration=args.duration, stagger=args.stagger
    )
    rounds: list[dict[str, Any]] = []
    seeded: dict[str, Any] | None = None
    with RedisServer() as redis:
        if args.interference:
            started = time.perf_counter()
            seeded = seed(redis, args.long_game, args.cold_games, args.cold_events)
            seeded["late_every"] = args.late_every
            say(
                f"seeded a {seeded['long_version']}-event game and {args.cold_games} cold games "
                f"in {time.perf_counter() - started:.1f} s"
            )
        for index in range(args.rounds):
            row: dict[str, Any] = {"round": index + 1}
            runs: list[tuple[str, dict[str, Any] | None]] = [("ours", None), ("minimal", None)]
            if args.before is not None:
                runs.append(("ours_before", None))
            if seeded is not None:
                runs.append(("ours_interference", seeded))
                if args.interference_control:
                    runs.append(("ours_control", seeded))
            for label, interference in runs:
                kind = "minimal" if label == "minimal" else "ours"
                config.tag = f"r{index}{label[0]}"
                row[label] = one_run(
                    kind,
                    redis,
                    config,
                    interference,
                    args=server_args(kind, args),
                    control=label == "ours_control",
                    tree=args.before if label == "ours_before" else ROOT,
                )
                say(f"round {index + 1} " + brief(label, row[label]))
            rounds.append(row)
    summary = summarise(rounds)
    payload = {
        "quick": args.quick,
        "config": {
            **asdict(config),
            "rounds": args.rounds,
            "interference": args.interference,
            "interference_control": args.interference_control,
            "signing_baseline": args.signing_baseline,
            "before": str(args.before) if args.before is not None else None,
        },
        "seeded": {k: v for k, v in (seeded or {}).items() if k != "cold_games"}
        | {"cold_games": args.cold_games},
        "summary": summary,
        "rounds": rounds,
    }
    path = write_result(result_name(args), payload, argv)
    r = summary["ratios"]
    baseline = "minimal (signing)" if args.signing_baseline else "minimal"
    line = (
        f"load: ours/{baseline} throughput {r['throughput']:.2f}x, p99 {r['p99']:.2f}x, "
        f"CPU per command {r['cpu_per_command']:.2f}x"
    )
    if "ratios_to_before" in summary:
        b = summary["ratios_to_before"]
        line += (
            f"; ours/before throughput {b['throughput']:.2f}x, p99 {b['p99']:.2f}x, "
            f"CPU per command {b['cpu_per_command']:.2f}x"
        )
    if "checkpoints" in summary:
        line += f"; {summary['checkpoints']['envelopes_per_checkpoint']:.1f} envelopes a checkpoint"
    if "interference" in summary:
        interference = summary["interference"]
        line += f"; p99 under interference {interference['p99_ratio']:.2f}x"
        if "p99_control_ratio" in interference:
            line += f" ({interference['p99_control_ratio']:.2f}x with it aimed at another server)"
    print(f"{line}; goals met {summary['goals_met']}; wrote {path}")
    return 0


# --- acknowledgement levels --------------------------------------------------------------------------

ACK_LEVELS = ("primary", "replica", "replica_fsync")


def redis_server_version() -> tuple[int, ...]:
    """The version of this machine's redis-server (the one the bench starts)."""
    done = subprocess.run([find_redis_server(), "--version"], capture_output=True, text=True, check=True)
    for word in done.stdout.split():
        if word.startswith("v="):
            return tuple(int(part) for part in word[2:].split(".") if part.isdigit())
    raise RuntimeError(f"no version in {done.stdout!r}")


class ReplicatedRedis:
    """A primary and its replica on loopback ports, in a directory of their own: the tables' server
    talks to the primary (`url`, `pid`), and above `primary` waits for the replica."""

    def __init__(self, aof: bool) -> None:
        self.aof = aof
        self.root = Path(tempfile.mkdtemp(prefix="bench-ack-"))
        self.nodes: tuple[RedisProcess, RedisProcess] | None = None

    def __enter__(self) -> ReplicatedRedis:
        extra = ("--appendonly", "yes", "--appendfsync", "everysec") if self.aof else ()
        self.nodes = start_replicated(self.root, *extra)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.nodes is not None:
            for node in self.nodes:
                node.stop()
            self.nodes = None

    @property
    def url(self) -> str:
        assert self.nodes is not None
        return self.nodes[0].url

    @property
    def pid(self) -> int:
        assert self.nodes is not None and self.nodes[0].process is not None
        return self.nodes[0].process.pid

    @property
    def durability(self) -> str:
        return "appendonly yes, appendfsync everysec" if self.aof else "appendonly no (memory only)"


def ack_levels(version: tuple[int, ...]) -> list[str]:
    """The levels this redis-server can give: replica_fsync needs WAITAOF (7.2)."""
    return [level for level in ACK_LEVELS if level != "replica_fsync" or version >= (7, 2)]


def ack_summary(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds per level, and each level's throughput and p99 against `primary`'s."""
    levels = {level: _medians([runs[level] for runs in sets]) for level in sets[0]}
    for level, figures in levels.items():
        figures["ack_p99_ms"] = statistics.median(runs[level]["ack_ms"]["p99"] for runs in sets)
        figures["unavailable"] = sum(runs[level]["rejected"].get("unavailable", 0) for runs in sets)
    base = levels["primary"]
    return {
        "levels": levels,
        "ratios_to_primary": {
            level: {
                "throughput": ratio(figures["commands_per_s"], base["commands_per_s"]),
                "p99": ratio(figures["p99_ms"], base["p99_ms"]),
            }
            for level, figures in levels.items()
        },
    }


def ack_main(args: argparse.Namespace, argv: list[str]) -> int:
    """The table workload at each acknowledgement level, side by side (see the module's doc)."""
    raise_nofile()
    if args.quick:
        args.rounds, args.duration, args.tables = 1, 2.0, 4
    version = redis_server_version()
    levels = ack_levels(version)
    written = ".".join(map(str, version))
    if "replica_fsync" not in levels:
        say(f"load --ack-levels: no replica_fsync: redis-server {written} has no WAITAOF (7.2 and later)")
    config = TableConfig(
        tables=args.tables, placements=args.placements, duration=args.duration, stagger=args.stagger
    )
    modes: dict[str, Mode] = {level: ({"ORCHESTRA_ACK": level}, []) for level in levels}
    with ReplicatedRedis(aof="replica_fsync" in levels) as pair:
        sets = rotated_runs("ours", config, modes, args.rounds, "round", on=pair)
        durability = pair.durability
    summary = ack_summary(sets)
    payload = {
        "quick": args.quick,
        "redis_version": written,
        "durability": durability,
        "left_out": [level for level in ACK_LEVELS if level not in levels],
        "config": {**asdict(config), "rounds": args.rounds},
        "summary": summary,
        "rounds": sets,
    }
    # A name of its own per variant (load_ack_tables4.json), as the documented workload's.
    path = write_result("load_ack" + result_name(args).removeprefix("load"), payload, argv)
    parts = []
    for level, figures in summary["levels"].items():
        against = summary["ratios_to_primary"][level]
        parts.append(
            f"{level} {figures['commands_per_s']:.0f} cmd/s ({against['throughput']:.2f}x), "
            f"p99 {figures['p99_ms']:.2f} ms ({against['p99']:.2f}x)"
        )
    print(f"load --ack-levels (redis {written}): {'; '.join(parts)}; wrote {path}")
    return 0
