"""The load generator: N games x P players x S spectators over real websockets against a server URL.

Open loop (`--mode open`): commands leave at `--rate` per second overall (Poisson or uniform spacing),
whatever the answers do; latencies count from the intended send time, so a generator or server that
falls behind shows up as latency instead of hiding (no coordinated omission). Closed loop
(`--mode closed`): each player sends its next command when the previous one is answered.

Players cycle through the legal performance and repair placements of the standard layout (their outcome
does not matter; the server must run with a large ORCHESTRA_MAX_PLACEMENTS), each with a unique id.
Latencies: command to its `accepted` answer, and command to each spectator's receipt of its envelope
(matched by the envelope's command_id and seat), plus per command the time until every spectator of the
game had it. The generator uses raw websocket connections and typed msgspec decoding of only the
fields it needs (a frame's view is not parsed at all: see `timed_part`), on uvloop, through a lean
client of its own by default (`bench.light_client`; `--client websockets` for the library's); its own CPU is
reported next to the server's so a saturated generator is visible. `--procs N` splits the games over N
generator processes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing as mp
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import httpx
import msgspec
import websockets
from websockets.asyncio.client import ClientConnection

from bench.common import (
    CpuMeter,
    RedisServer,
    ServerProcess,
    close_clients,
    percentiles,
    raise_nofile,
    say,
    write_result,
)
from bench.light_client import LightSocket
from domain import STANDARD, PerformanceToken, RepairToken, legal_spaces

Socket = ClientConnection | LightSocket
ANSWER_TIMEOUT = 10.0
DRAIN_SECONDS = 5.0


def placements() -> list[str]:
    """The JSON bodies (without type and id) of every legal performance and repair placement."""
    bodies: list[str] = []
    for era in ("baroque", "classical", "romantic"):
        for space in legal_spaces(STANDARD, PerformanceToken(era=era)):
            bodies.append(f'"token":{{"kind":"performance","era":"{era}"}},"space":"{space}"')
    for family in ("strings", "winds", "percussion_keyboards"):
        for space in legal_spaces(STANDARD, RepairToken(family=family)):
            bodies.append(f'"token":{{"kind":"repair","family":"{family}"}},"space":"{space}"')
    return bodies


@dataclass
class LoadConfig:
    """One load run."""

    url: str = ""
    games: int = 20
    players: int = 3
    spectators: int = 5
    mode: str = "closed"  # closed | open
    rate: float = 500.0  # open loop: commands per second overall
    arrival: str = "poisson"  # poisson | uniform
    duration: float = 10.0
    max_commands: int = 1_000_000
    # hello's "view" (false: frames without the view; "full": the whole view; "delta": what changed)
    view: bool | str = "full"
    compression: bool = True  # offer permessage-deflate, as browsers and `websockets` do by default
    # The meter's websocket client: "light" (bench.light_client: lean, refuses compression if agreed to)
    # or "websockets" (the library's client, which can decompress).
    client: str = "light"
    procs: int = 1
    server_pid: int | None = None
    redis_pid: int | None = None
    seed: int = 1
    connect_concurrency: int = 100
    tag: str = "p0"
    extra: dict[str, Any] = field(default_factory=dict)


class Envelope(msgspec.Struct):
    version: int = 0
    command_id: str | None = None
    seat: int | None = None


class Frame(msgspec.Struct):
    type: str
    id: str | None = None
    code: str | None = None
    envelopes: list[Envelope] = []


_decode = msgspec.json.Decoder(Frame).decode
# The hello's "view" for each --view choice of the benchmarks.
VIEWS: dict[str, bool | str] = {"whole": "full", "delta": "delta", "none": False}
# Where a frame's view begins: it follows the envelopes, and `"` inside a JSON string is escaped, so these
# bytes can only be the frame's own key.
_VIEW_KEYS = (b',"view":', b',"view_delta":')


def timed_part(frame: bytes) -> Frame:
    """The fields of a frame the meter times, decoded without parsing the view (whole, or a delta) after them.

    A whole view grows with the game (tens of KB); parsing it for each of a game's spectators cost the
    generator a core's fraction that then showed up as the server's latency on a 2-core machine. A view
    delta is smaller but comes as often.
    """
    for key in _VIEW_KEYS:
        cut = frame.find(key)
        if cut >= 0:
            break
    else:
        return _decode(frame)
    try:
        return _decode(frame[:cut] + b"}")
    except msgspec.DecodeError:  # not the layout above: parse it all
        return _decode(frame)


class Tracked:
    """One command in flight: when it was (meant to be) sent, by whom, and its spectator receipts."""

    __slots__ = ("sent", "seat", "game", "receipts", "last", "future")

    def __init__(self, sent: float, seat: int, game: int) -> None:
        self.sent, self.seat, self.game = sent, seat, game
        self.receipts = 0
        self.last = 0.0
        self.future: asyncio.Future[None] | None = None


class Worker:
    """One generator process's share of the games."""

    def __init__(self, config: LoadConfig) -> None:
        self.config = config
        self.bodies = placements()
        self.tracked: dict[str, Tracked] = {}
        self.ack: list[float] = []
        self.spectator: list[float] = []
        self.rejected: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.accepted = 0
        self.sent = 0
        self.spectator_frames = 0
        self.spectator_bytes = 0
        self.last_answer = 0.0
        self.players: list[tuple[int, int, Socket]] = []
        self.sockets: list[Socket] = []
        self.readers: list[asyncio.Task[None]] = []
        self.counter = 0
        self.started = 0.0

    def _error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def setup(self) -> None:
        config = self.config
        base = config.url.rstrip("/")
        names = [f"P{i}" for i in range(config.players)]
        created: list[dict[str, Any]] = []
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            gate = asyncio.Semaphore(20)

            async def create() -> dict[str, Any]:
                async with gate:
                    response = await http.post("/games", json={"players": names})
                    response.raise_for_status()
                    answer: dict[str, Any] = response.json()
                    return answer

            created = await asyncio.gather(*(create() for _ in range(config.games)))
        ws_base = base.replace("http://", "ws://").replace("https://", "wss://")
        gate = asyncio.Semaphore(config.connect_concurrency)

        async def connect(game: int, game_id: str, token: str | None, seat: int) -> None:
            async with gate:
                ws: Socket
                if config.client == "light":
                    url = f"{ws_base}/games/{game_id}/ws"
                    ws = await LightSocket.connect(url, offer_deflate=config.compression)
                else:
                    ws = await websockets.connect(
                        f"{ws_base}/games/{game_id}/ws",
                        max_size=None,
                        open_timeout=30,
                        close_timeout=2,
                        ping_interval=None,
                        compression="deflate" if config.compression else None,
                        max_queue=None,
                    )
                hello: dict[str, Any] = {"type": "hello", "token": token, "since": None}
                if config.view is not True:
                    hello["view"] = config.view
                await ws.send(json.dumps(hello))
                welcome = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if welcome.get("type") != "welcome":
                    raise RuntimeError(f"no welcome: {welcome}")
            self.sockets.append(ws)
            if token is None:
                self.readers.append(asyncio.create_task(self._read_spectator(ws)))
            else:
                self.players.append((game, seat, ws))
                self.readers.append(asyncio.create_task(self._read_player(ws)))

        jobs = []
        for game, answer in enumerate(created):
            for seat_info in answer["seats"]:
                jobs.append(connect(game, answer["game_id"], seat_info["token"], seat_info["seat"]))
            for _ in range(config.spectators):
                jobs.append(connect(game, answer["game_id"], None, -1))
        await asyncio.gather(*jobs)
        # Players in game order, seats interleaved, so round-robin visits every game in turn.
        self.players.sort(key=lambda item: (item[1], item[0]))

    def _frame(self, game: int, seat: int) -> tuple[str, str]:
        self.counter += 1
        cid = f"{self.config.tag}g{game}s{seat}n{self.counter}"
        body = self.bodies[(self.counter + seat) % len(self.bodies)]
        return cid, f'{{"type":"place","id":"{cid}",{body}}}'

    async def _read_player(self, ws: Socket) -> None:
        tracked = self.tracked
        clock = time.perf_counter
        try:
            while True:
                # Bytes as they came: the meter skips websockets' UTF-8 decoding of frames it ignores.
                data = cast(bytes, await ws.recv(decode=False))
                if data.startswith(b'{"type":"events"'):
                    continue
                frame = _decode(data)
                now = clock()
                item = tracked.get(frame.id) if frame.id is not None else None
                if frame.type == "accepted":
                    self.accepted += 1
                elif frame.type == "rejected":
                    code = frame.code or "?"
                    self.rejected[code] = self.rejected.get(code, 0) + 1
                else:
                    continue
                self.last_answer = now
                if item is not None:
                    self.ack.append(now - item.sent)
                    if item.future is not None and not item.future.done():
                        item.future.set_result(None)
        except websockets.ConnectionClosed:
            pass
        except Exception:
            self._error("player_read")

    async def _read_spectator(self, ws: Socket) -> None:
        tracked = self.tracked
        clock = time.perf_counter
        receipts = self.spectator
        try:
            while True:
                data = cast(bytes, await ws.recv(decode=False))
                now = clock()
                self.spectator_frames += 1
                self.spectator_bytes += len(data)
                frame = timed_part(data)
                for env in frame.envelopes:
                    if env.command_id is None:
                        continue
                    item = tracked.get(env.command_id)
                    if item is not None and item.seat == env.seat:
                        item.receipts += 1
                        item.last = now
                        receipts.append(now - item.sent)
        except websockets.ConnectionClosed:
            pass
        except Exception:
            self._error("spectator_read")

    async def _closed_player(self, game: int, seat: int, ws: Socket, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        clock = time.perf_counter
        while clock() < deadline and self.sent < self.config.max_commands:
            cid, text = self._frame(game, seat)
            item = Tracked(clock(), seat, game)
            item.future = loop.create_future()
            self.tracked[cid] = item
            self.sent += 1
            try:
                await ws.send(text)
                await asyncio.wait_for(item.future, ANSWER_TIMEOUT)
            except TimeoutError:
                self._error("answer_timeout")
            except websockets.ConnectionClosed:
                self._error("connection_closed")
                return

    async def _open_loop(self, deadline: float) -> None:
        config = self.config
        rng = random.Random(config.seed)
        players = self.players
        clock = time.perf_counter
        mean_gap = 1.0 / config.rate
        next_at = clock()
        index = 0
        while next_at < deadline and self.sent < config.max_commands:
            delay = next_at - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            game, seat, ws = players[index % len(players)]
            index += 1
            cid, text = self._frame(game, seat)
            self.tracked[cid] = Tracked(next_at, seat, game)
            self.sent += 1
            try:
                await ws.send(text)
            except websockets.ConnectionClosed:
                self._error("connection_closed")
            next_at += rng.expovariate(1.0 / mean_gap) if config.arrival == "poisson" else mean_gap

    async def run(self) -> dict[str, Any]:
        config = self.config
        clock = time.perf_counter
        cpu0 = time.process_time()
        self.started = clock()
        deadline = self.started + config.duration
        if config.mode == "closed":
            await asyncio.gather(
                *(self._closed_player(game, seat, ws, deadline) for game, seat, ws in self.players)
            )
        else:
            await self._open_loop(deadline)
        sending_ended = clock()
        # Drain: wait (bounded) for the answers and spectator receipts still in flight.
        drain_until = clock() + DRAIN_SECONDS
        while clock() < drain_until:
            answered = self.accepted + sum(self.rejected.values())
            if answered >= self.sent and self._spectators_done():
                break
            await asyncio.sleep(0.02)
        generator_cpu = time.process_time() - cpu0
        elapsed = max(self.last_answer, sending_ended) - self.started
        all_spectators: list[float] = []
        incomplete = 0
        if config.spectators:
            for item in self.tracked.values():
                if item.receipts >= config.spectators:
                    all_spectators.append(item.last - item.sent)
                else:
                    incomplete += 1
        answered = self.accepted + sum(self.rejected.values())
        return {
            "sent": self.sent,
            "accepted": self.accepted,
            "rejected": dict(self.rejected),
            "errors": dict(self.errors),
            "unanswered": max(0, self.sent - answered),
            "elapsed": elapsed,
            "sending_seconds": sending_ended - self.started,
            "ack": self.ack,
            "spectator": self.spectator,
            "all_spectators": all_spectators,
            "spectators_incomplete": incomplete,
            "spectator_frames": self.spectator_frames,
            "spectator_bytes": self.spectator_bytes,
            "generator_cpu": generator_cpu,
        }

    def _spectators_done(self) -> bool:
        if not self.config.spectators:
            return True
        want = self.config.spectators
        return all(item.receipts >= want for item in self.tracked.values())

    async def close(self) -> None:
        await close_clients(self.sockets, self.readers)


async def _worker_main(config: LoadConfig, ready: Callable[[], None]) -> dict[str, Any]:
    worker = Worker(config)
    try:
        await worker.setup()
        ready()
        server = CpuMeter(config.server_pid) if config.server_pid else None
        redis_meter = CpuMeter(config.redis_pid) if config.redis_pid else None
        rss_start = server.rss() if server else 0
        for meter in (server, redis_meter):
            if meter:
                meter.start()
        raw = await worker.run()
        raw["server_cpu"] = server.stop() if server else None
        raw["redis_cpu"] = redis_meter.stop() if redis_meter else None
        raw["server_rss_start"] = rss_start
        raw["server_rss_end"] = server.rss() if server else 0
        return raw
    finally:
        await worker.close()


def _run_in_loop(config: LoadConfig, ready: Callable[[], None]) -> dict[str, Any]:
    import uvloop

    raise_nofile()
    # The generator's own cyclic-GC pauses (15-20 ms at full collections, measured) would show as the
    # server's latency: the meter runs with the collector off, and collects once it is done.
    gc.collect()
    gc.disable()
    try:
        return uvloop.run(_worker_main(config, ready))
    finally:
        gc.enable()
        gc.collect()


def _child(config: LoadConfig, barrier: Any, queue: Any) -> None:
    try:
        queue.put(("ok", _run_in_loop(config, lambda: barrier.wait(120))))
    except BaseException as exc:  # reported to the parent, which raises
        with contextlib.suppress(Exception):
            barrier.abort()
        queue.put(("error", repr(exc)))


def run(config: LoadConfig) -> dict[str, Any]:
    """Run the load (in this process, or split over `config.procs` processes) and summarise it."""
    if config.procs <= 1:
        raws = [_run_in_loop(config, lambda: None)]
    else:
        context = mp.get_context("spawn")
        barrier = context.Barrier(config.procs)
        queue = context.Queue()
        children = []
        for index in range(config.procs):
            share = LoadConfig(**{**asdict(config), "procs": 1})
            share.games = config.games // config.procs + (1 if index < config.games % config.procs else 0)
            share.rate = config.rate / config.procs
            share.max_commands = max(1, config.max_commands // config.procs)
            share.tag = f"p{index}"
            share.seed = config.seed + index
            # One meter of the server's CPU is enough: the first process's.
            if index:
                share.server_pid = share.redis_pid = None
            process = context.Process(target=_child, args=(share, barrier, queue), daemon=True)
            process.start()
            children.append(process)
        raws = []
        for _ in children:
            status, payload = queue.get(timeout=config.duration + 300)
            if status != "ok":
                raise RuntimeError(f"a generator process failed: {payload}")
            raws.append(payload)
        for process in children:
            process.join(10)
    return summarise(config, raws)


def summarise(config: LoadConfig, raws: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge the processes' raw samples into one result."""

    def total(key: str) -> int:
        return sum(int(raw[key]) for raw in raws)

    def merged(key: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for raw in raws:
            for name, count in raw[key].items():
                out[name] = out.get(name, 0) + count
        return out

    elapsed = max(raw["elapsed"] for raw in raws)
    accepted = total("accepted")
    metered = next((raw for raw in raws if raw["server_cpu"]), None)
    generator_cpu = sum(raw["generator_cpu"] for raw in raws)
    frames = total("spectator_frames")
    server: dict[str, Any] = {}
    if metered is not None:
        server = {
            **metered["server_cpu"],
            "cpu_us_per_command": metered["server_cpu"]["cpu_seconds"] / accepted * 1e6 if accepted else 0.0,
            "rss_mib_start": metered["server_rss_start"] / 2**20,
            "rss_mib_end": metered["server_rss_end"] / 2**20,
        }
    redis_cpu = metered["redis_cpu"] if metered is not None else None
    return {
        "config": {k: v for k, v in asdict(config).items() if k not in ("extra",)},
        "sent": total("sent"),
        "accepted": accepted,
        "rejected": merged("rejected"),
        "errors": merged("errors"),
        "unanswered": total("unanswered"),
        "elapsed_s": elapsed,
        "commands_per_s": accepted / elapsed if elapsed else 0.0,
        "ack_ms": percentiles([x for raw in raws for x in raw["ack"]]),
        "spectator_ms": percentiles([x for raw in raws for x in raw["spectator"]]),
        "all_spectators_ms": percentiles([x for raw in raws for x in raw["all_spectators"]]),
        "spectators_incomplete": total("spectators_incomplete"),
        "spectator_frame_bytes_mean": total("spectator_bytes") / frames if frames else 0.0,
        "server": server,
        "redis": redis_cpu,
        "generator": {
            "procs": max(1, config.procs),
            "cpu_seconds": generator_cpu,
            "core_share": generator_cpu / elapsed if elapsed else 0.0,
            "core_share_per_proc": generator_cpu / elapsed / max(1, config.procs) if elapsed else 0.0,
        },
    }


def run_against(
    kind: str,
    redis: RedisServer,
    config: LoadConfig,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Start server `kind` ("ours" or "minimal") on `redis`, run `config` against it, stop it."""
    with ServerProcess(kind, redis.url, env, args) as server:
        config = LoadConfig(**{**asdict(config), "url": server.url, "server_pid": server.pid})
        config.redis_pid = redis.pid
        result = run(config)
        result["server_kind"] = kind
        return result


def brief(result: dict[str, Any]) -> str:
    """One line of a load result."""
    server = result.get("server") or {}
    return (
        f"{result.get('server_kind', '?')}: {result['commands_per_s']:.0f} cmd/s, "
        f"ack p50/p99 {result['ack_ms']['p50']:.2f}/{result['ack_ms']['p99']:.2f} ms, "
        f"all-spectators p99 {result['all_spectators_ms']['p99']:.2f} ms, "
        f"server {server.get('core_share', 0):.2f} core, generator "
        f"{result['generator']['core_share_per_proc']:.2f} core/proc, "
        f"rejected {result['rejected']}, errors {result['errors']}"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="a running server's URL (http://host:port)")
    parser.add_argument(
        "--start",
        choices=["ours", "minimal"],
        help="start this server (and its own redis-server on a free port) as a child",
    )
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--players", type=int, default=3)
    parser.add_argument("--spectators", type=int, default=5)
    parser.add_argument("--mode", choices=["closed", "open"], default="closed")
    parser.add_argument("--rate", type=float, default=500.0, help="open loop: commands per second overall")
    parser.add_argument("--arrival", choices=["poisson", "uniform"], default="poisson")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of sending")
    parser.add_argument("--max-commands", type=int, default=1_000_000)
    parser.add_argument("--procs", type=int, default=1, help="generator processes (games split among them)")
    parser.add_argument("--no-view", action="store_true", help='hello with "view": false')
    parser.add_argument("--delta", action="store_true", help='hello with "view": "delta"')
    parser.add_argument("--no-compression", action="store_true", help="do not offer permessage-deflate")
    parser.add_argument(
        "--client",
        choices=["light", "websockets"],
        default="light",
        help="the meter's websocket client (websockets: the library's, which can decompress)",
    )
    parser.add_argument("--server-pid", type=int, help="with --url: the server's pid, for its CPU and RSS")
    parser.add_argument("--fsync-always", action="store_true", help="--start: Redis with appendfsync always")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    raise_nofile()
    config = LoadConfig(
        games=args.games,
        players=args.players,
        spectators=args.spectators,
        mode=args.mode,
        rate=args.rate,
        arrival=args.arrival,
        duration=args.duration,
        max_commands=args.max_commands,
        procs=args.procs,
        view=False if args.no_view else "delta" if args.delta else "full",
        compression=not args.no_compression,
        client=args.client,
        server_pid=args.server_pid,
    )
    if args.start:
        with RedisServer(fsync_always=args.fsync_always) as redis:
            result = run_against(args.start, redis, config)
            result["redis_durability"] = redis.durability
    elif args.url:
        config.url = args.url
        result = run(config)
    else:
        print("bench generator: give --url or --start", file=sys.stderr)
        return 2
    say(brief(result))
    path = write_result("generator", {"result": result}, argv)
    print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=2))
    say(f"wrote {path}")
    return 0
