"""Resource abuse: hostile clients on one server, while a well-behaved client measures its latency.

    python -m bench.abuse                                  # 30 s baseline, then 30 s under abuse
    python -m bench.abuse --seconds 8 --hello-timeout 2 --queue-limit 50    # the CI size

It starts its own redis-server and `orchestra serve` on free loopback ports with the protocol's default
limits, except placements per game (unlimited: a slow reader's game must be able to outgrow its
queue). A probe, a separate process so the abusers' CPU does not sit in its event loop, plays one game
at a steady `--rate` of placements and records each command's round trip: first alone (the baseline),
then while these run at once:

- silent: `--silent` connections that never say hello (closed 1008 after the hello timeout);
- slow readers: spectators taking whole views with a tiny receive buffer that never read a busy game
  (closed 1013 once their outgoing queue is full); their game is fed by players at just under the rate limit;
- oversized: frames over the frame limit (`too_large`) and far over it (closed 1009);
- nested: frames nested thousands deep within the limit (`bad_request`);
- command flood: players sending as fast as they can (`rate_limited` past the burst);
- connection flood: connect, hello, close, as fast as possible, several at a time.

Reported: the probe's p50/p99 before and during the abuse and their ratios, what each abuse got (answers
by code, closes by code), the server's RSS, and whether its log holds an error or a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from bench.common import ROOT, RedisServer, ServerProcess, percentiles, raise_nofile, ratio
from bench.soak import log_problems
from domain import STANDARD
from orchestra_client import ConnectionRefused, GameClient, create_game
from orchestra_client.bots import random_placement

# The protocol's default limits (bench.common's SERVER_ENV lifts some of them for the benchmarks).
ABUSE_ENV = {
    "ORCHESTRA_RATE_PER_SECOND": "50",
    "ORCHESTRA_RATE_BURST": "100",
    "ORCHESTRA_QUEUE_LIMIT": "1000",
    # Unlimited placements, so the slow readers' game outgrows an outgoing queue of the default size.
    "ORCHESTRA_MAX_PLACEMENTS": "1000000",
    # The slow readers read only once the run is over, to find their close frame: the server must not
    # have cut them off by then (tests/e2e/test_limits.py checks the cut).
    "ORCHESTRA_SLOW_CLOSE_GRACE": "600",
}


@dataclass
class Abuse:
    """What one kind of abuse got from the server."""

    attempts: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    closes: Counter[str] = field(default_factory=Counter)
    notes: dict[str, Any] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "answers": dict(self.answers),
            "closes": dict(self.closes),
            **self.notes,
        }


def _ws(url: str, game_id: str) -> str:
    return url.replace("http://", "ws://") + f"/games/{game_id}/ws"


async def _hello(ws: ClientConnection, token: str | None) -> None:
    await ws.send(json.dumps({"type": "hello", "token": token, "since": None}))
    first = json.loads(await asyncio.wait_for(ws.recv(), 10))
    if first.get("type") != "welcome":
        raise ConnectionRefused(None, str(first))


async def _close_code(ws: ClientConnection, timeout: float) -> str:
    """Read until the server closes the session; its close code ("open" if it did not in time)."""
    try:
        async with asyncio.timeout(timeout):
            async for _ in ws:
                pass
    except TimeoutError:
        return "open"
    except ConnectionClosed:
        pass
    return str(ws.close_code)


async def silent(url: str, game_id: str, count: int, stop: asyncio.Event, abuse: Abuse) -> None:
    """Connections that never say hello: each should be closed (1008) after the hello timeout."""
    sockets: list[ClientConnection] = []
    began = time.monotonic()
    for _ in range(count):
        try:
            sockets.append(await websockets.connect(_ws(url, game_id), open_timeout=10))
            abuse.attempts += 1
        except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
            abuse.closes[f"connect_failed:{type(exc).__name__}"] += 1
    closed_after: list[float] = []

    async def watch(ws: ClientConnection) -> None:
        code = await _close_code(ws, max(1.0, 30.0))
        abuse.closes[code] += 1
        if code != "open":
            closed_after.append(time.monotonic() - began)

    watchers = [asyncio.create_task(watch(ws)) for ws in sockets]
    await stop.wait()
    for ws in sockets:
        await ws.close()
    await asyncio.gather(*watchers, return_exceptions=True)
    if closed_after:
        abuse.notes["closed_after_s"] = {
            "min": round(min(closed_after), 2),
            "max": round(max(closed_after), 2),
        }


def _raw_spectator(url: str, game_id: str) -> socket.socket:
    """A spectator that never reads: a websocket handshake and a hello written by hand over a socket
    with a tiny receive buffer, then nothing read at all (a client library would read ahead)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(10)
    raw.connect((host, int(port)))
    key = base64.b64encode(random.randbytes(16)).decode()
    raw.sendall(
        f"GET /games/{game_id}/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    response = b""
    while b"\r\n\r\n" not in response:  # the 101 answer, before any frame
        chunk = raw.recv(1)
        if not chunk:
            raise ConnectionError("closed during the websocket handshake")
        response += chunk
    if not response.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"handshake refused: {response[:60]!r}")
    # Whole views, so that the frames it never reads fill its buffers quickly.
    payload = json.dumps({"type": "hello", "token": None, "since": None, "view": "full"}).encode()
    mask = random.randbytes(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    raw.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
    return raw


def _drain_close_code(raw: socket.socket, timeout: float) -> str:
    """Read what the server left in the socket: the code of the close frame it ends with, else "open".

    The server's close frame waits behind everything queued before it, and the server then waits for a
    close reply that never comes: the frame is looked for at the end of the data, not after an EOF.
    """
    raw.settimeout(0.5)
    tail = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = raw.recv(1 << 20)
        except TimeoutError:
            break
        except OSError as exc:
            return f"error:{type(exc).__name__}"
        if not chunk:
            break
        tail = (tail + chunk)[-256:]
    at = tail.rfind(b"\x88")
    if at >= 0 and len(tail) >= at + 4 and tail[at + 1] == len(tail) - at - 2:
        return str(int.from_bytes(tail[at + 2 : at + 4], "big"))
    return "open"


async def slow_readers(url: str, readers: int, stop: asyncio.Event, abuse: Abuse) -> None:
    """Spectators that never read a busy game, fed by two sessions per seat at just under the rate limit."""
    created = await create_game(url, ["F0", "F1", "F2", "F3"])
    game_id = created["game_id"]
    stuck = [await asyncio.to_thread(_raw_spectator, url, game_id) for _ in range(readers)]
    abuse.attempts += len(stuck)
    fed = Counter[str]()

    async def feed(token: str, seed: int) -> None:
        rng = random.Random(seed)
        async with await GameClient.connect(url, game_id, token, view=False) as player:
            while not stop.is_set():
                frame = random_placement(STANDARD, rng)
                answer = await player.place(frame.pop("token"), frame.pop("space"), **frame)
                fed[answer.get("code", "accepted")] += 1
                await asyncio.sleep(0.024)  # ~40 per second per seat, under the 50 per second limit

    # Two sessions per seat (the rate limit is per connection): the game grows fast, and so do its views.
    seats = created["seats"] * 2
    feeders = [asyncio.create_task(feed(seat["token"], i)) for i, seat in enumerate(seats)]
    await stop.wait()
    await asyncio.gather(*feeders, return_exceptions=True)
    codes = await asyncio.gather(*(asyncio.to_thread(_drain_close_code, raw, 10.0) for raw in stuck))
    abuse.closes.update(codes)
    abuse.notes["feeder_answers"] = dict(fed)
    for raw in stuck:
        raw.close()


async def _frames_abuse(
    url: str, game_id: str, token: str, make: Any, stop: asyncio.Event, abuse: Abuse, pace: float
) -> None:
    """Send frames from `make()` one at a time, noting each answer or close; reconnect after a close."""
    while not stop.is_set():
        try:
            async with websockets.connect(_ws(url, game_id), max_size=None, open_timeout=10) as ws:
                await _hello(ws, token)
                while not stop.is_set():
                    abuse.attempts += 1
                    await ws.send(make())
                    while True:
                        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                        if frame.get("type") in ("accepted", "rejected"):
                            abuse.answers[frame.get("code", "accepted")] += 1
                            break
                    await asyncio.sleep(pace)
        except ConnectionClosed as exc:
            abuse.closes[str(exc.rcvd.code if exc.rcvd else None)] += 1
        except (OSError, TimeoutError) as exc:
            abuse.closes[f"error:{type(exc).__name__}"] += 1
            await asyncio.sleep(0.1)


async def command_flood(url: str, game_id: str, token: str, stop: asyncio.Event, abuse: Abuse) -> None:
    """A player sending placements as fast as it can, 64 in flight."""
    rng = random.Random(3)
    count = 0
    while not stop.is_set():
        async with websockets.connect(_ws(url, game_id), max_size=None, open_timeout=10) as ws:
            await _hello(ws, token)
            window = asyncio.Semaphore(64)

            async def read(ws: ClientConnection = ws, window: asyncio.Semaphore = window) -> None:
                async for message in ws:
                    frame = json.loads(message)
                    if frame.get("type") in ("accepted", "rejected"):
                        abuse.answers[frame.get("code", "accepted")] += 1
                        window.release()

            reader = asyncio.create_task(read())
            try:
                while not stop.is_set() and not reader.done():
                    try:
                        await asyncio.wait_for(window.acquire(), 1.0)
                    except TimeoutError:
                        continue
                    count += 1
                    abuse.attempts += 1
                    frame = {"type": "place", "id": f"flood-{count}", **random_placement(STANDARD, rng)}
                    await ws.send(json.dumps(frame))
            except ConnectionClosed:
                pass
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
            if ws.close_code is not None and not stop.is_set():
                abuse.closes[str(ws.close_code)] += 1


async def connection_flood(url: str, game_id: str, stop: asyncio.Event, abuse: Abuse, parallel: int) -> None:
    """Connect, hello, close, as fast as possible, `parallel` at a time."""

    async def one() -> None:
        while not stop.is_set():
            abuse.attempts += 1
            try:
                async with websockets.connect(_ws(url, game_id), open_timeout=10) as ws:
                    await _hello(ws, None)
                abuse.answers["welcome"] += 1
            except (
                OSError,
                TimeoutError,
                ConnectionClosed,
                ConnectionRefused,
                websockets.InvalidHandshake,
            ) as exc:
                abuse.closes[f"error:{type(exc).__name__}"] += 1
                await asyncio.sleep(0.05)

    await asyncio.gather(*(one() for _ in range(parallel)))


async def _probe(url: str, seconds: float, rate: float) -> list[float]:
    """The well-behaved client: placements at `rate` per second, each round trip in seconds (a new game
    whenever one holds its maximum of placements)."""
    rng = random.Random(1)
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    next_at = time.monotonic()
    while time.monotonic() < deadline:
        created = await create_game(url, ["Probe"])
        token = created["seats"][0]["token"]
        async with await GameClient.connect(url, created["game_id"], token, view=False) as me:
            while time.monotonic() < deadline:
                frame = random_placement(STANDARD, rng)
                began = time.monotonic()
                answer = await me.place(frame.pop("token"), frame.pop("space"), **frame)
                if answer.get("code") == "limit_reached":
                    break
                latencies.append(time.monotonic() - began)
                if answer["type"] != "accepted":
                    raise RuntimeError(f"the probe's placement was refused: {answer}")
                next_at += 1 / rate
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    return latencies


async def _run_probe(url: str, seconds: float, rate: float) -> list[float]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.abuse",
        "--probe",
        url,
        "--seconds",
        str(seconds),
        "--rate",
        str(rate),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), seconds + 60)
    if process.returncode != 0:
        raise RuntimeError(f"the probe failed with {process.returncode}")
    latencies: list[float] = json.loads(out)
    return latencies


async def run(args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    """Baseline, then abuse; the figures."""
    url = server.url
    process = psutil.Process(server.pid)
    baseline = await _run_probe(url, args.seconds, args.rate)
    rss_before = process.memory_info().rss
    target = await create_game(url, ["X0", "X1", "X2", "X3"])
    game_id, tokens = target["game_id"], [s["token"] for s in target["seats"]]
    stop = asyncio.Event()
    kinds = {
        name: Abuse()
        for name in ("silent", "slow_readers", "oversized", "nested", "command_flood", "connection_flood")
    }
    filler = "x" * (args.frame_limit + 1024)
    huge = "y" * (args.frame_limit * 8)
    deep = (
        '{"type": "place", "id": "deep", "token": '
        + "[" * (args.frame_limit // 3)
        + "]" * (args.frame_limit // 3)
        + "}"
    )
    oversized_frames = [json.dumps({"type": "place", "id": "big", "space": filler}), huge]
    tasks = [
        asyncio.create_task(silent(url, game_id, args.silent, stop, kinds["silent"])),
        asyncio.create_task(slow_readers(url, args.slow_readers, stop, kinds["slow_readers"])),
        asyncio.create_task(
            _frames_abuse(
                url,
                game_id,
                tokens[0],
                lambda: random.choice(oversized_frames),
                stop,
                kinds["oversized"],
                0.02,
            )
        ),
        asyncio.create_task(
            _frames_abuse(url, game_id, tokens[1], lambda: deep, stop, kinds["nested"], 0.01)
        ),
        asyncio.create_task(command_flood(url, game_id, tokens[2], stop, kinds["command_flood"])),
        asyncio.create_task(
            connection_flood(url, game_id, stop, kinds["connection_flood"], args.connection_flood)
        ),
    ]
    await asyncio.sleep(1.0)  # let every abuse get going
    peak = 0
    probe = asyncio.create_task(_run_probe(url, args.seconds, args.rate))
    while not probe.done():
        peak = max(peak, process.memory_info().rss)
        await asyncio.sleep(0.25)
    during = await probe
    stop.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [repr(r) for r in results if isinstance(r, BaseException)]
    await asyncio.sleep(1.0)
    base, under = percentiles(baseline), percentiles(during)
    return {
        "probe_rate_per_s": args.rate,
        "seconds_per_phase": args.seconds,
        "baseline_ms": {k: round(v, 2) for k, v in base.items()},
        "under_abuse_ms": {k: round(v, 2) for k, v in under.items()},
        "ratio_p50": round(ratio(under["p50"], base["p50"]), 2),
        "ratio_p99": round(ratio(under["p99"], base["p99"]), 2),
        "abuse": {name: abuse.figures() for name, abuse in kinds.items()},
        "abuser_failures": failures,
        "rss_mib": {
            "before": round(rss_before / 2**20, 1),
            "peak_during": round(peak / 2**20, 1),
            "after": round(process.memory_info().rss / 2**20, 1),
        },
    }


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="python -m bench.abuse", description=__doc__.split("\n\n")[0])
    cli.add_argument("--seconds", type=float, default=30.0, help="length of each phase (default 30)")
    cli.add_argument("--rate", type=float, default=20.0, help="the probe's placements per second")
    cli.add_argument("--silent", type=int, default=200, help="connections that never say hello")
    cli.add_argument("--slow-readers", type=int, default=20)
    cli.add_argument("--connection-flood", type=int, default=8, help="parallel connect/close loops")
    cli.add_argument("--hello-timeout", type=float, default=10.0, help="the server's setting")
    cli.add_argument("--queue-limit", type=int, default=1000, help="the server's setting")
    cli.add_argument("--frame-limit", type=int, default=16 * 1024, help="the server's setting")
    cli.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    cli.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    return cli


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.probe:
        print(json.dumps(asyncio.run(_probe(args.probe, args.seconds, args.rate))))
        return 0
    raise_nofile()
    env = {
        **ABUSE_ENV,
        "ORCHESTRA_HELLO_TIMEOUT": str(args.hello_timeout),
        "ORCHESTRA_QUEUE_LIMIT": str(args.queue_limit),
        "ORCHESTRA_MAX_FRAME_BYTES": str(args.frame_limit),
    }
    with RedisServer() as redis_server, ServerProcess("ours", redis_server.url, env) as server:
        report = asyncio.run(run(args, server))
        report["server_alive"] = server.process.poll() is None
        server.stop()
        report["log_problems"] = log_problems(server.log_path.read_text(errors="replace"))[:20]
    report["command"] = "python -m bench.abuse " + " ".join(argv if argv is not None else sys.argv[1:])
    text = json.dumps(report, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    ok = report["server_alive"] and not report["log_problems"] and not report["abuser_failures"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
