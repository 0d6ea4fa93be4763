"""Fan-out: one event to 1,000 spectators of one game, time until all received, vs websockets broadcast().

Ours: a player's command goes through the whole server (decode, decide, append, fold, one frame encoded
once, one outbox per spectator); the clock runs from the command's send to the last spectator's receipt.
Baseline: a plain `websockets` server in its own process that calls `websockets.broadcast()` with the
same bytes (the very frame our server sent, captured in this run) to the same number of clients; the
clock runs from the trigger's send to the last receipt. Both run on uvloop and decline
permessage-deflate (as `orchestra serve` does by default); they are measured with clients that offer it
(as browsers do) and clients that do not.

`--writer` also weighs the direct write of shared frames (`server/compat/uvicorn.py`, the server's use
of uvicorn's private websocket protocol, kept only while it buys more than 10%): without compression,
ours runs with it and without it (`ORCHESTRA_WS_SHARED_FRAMES=false`, every frame through ASGI), in the
order with, without, without, with (the machine drifts), and the pooled medians' ratios are reported.

    python -m bench.fanout serve-broadcast --port 0     (the baseline server, started by the benchmark)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx
import msgspec
import websockets
from websockets.asyncio.client import ClientConnection

from bench.common import (
    ROOT,
    CpuMeter,
    RedisServer,
    ServerProcess,
    close_clients,
    open_client,
    raise_nofile,
    ratio,
    say,
    write_result,
)
from server.ops.runner import run as run_on_servers_loop

GOAL = 1.3
WRITER_GOAL = 0.10  # what the direct write must buy to stay
WRITER_MODES = {
    "direct": {"ORCHESTRA_WS_SHARED_FRAMES": "true"},
    "asgi": {"ORCHESTRA_WS_SHARED_FRAMES": "false"},
}


class _Env(msgspec.Struct):
    command_id: str | None = None


class _Frame(msgspec.Struct):
    type: str
    envelopes: list[_Env] = []


_decode = msgspec.json.Decoder(_Frame).decode


class Audience:
    """N spectator connections that count, per command id, how many have received it and when the last did."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.sockets: list[ClientConnection] = []
        self.readers: list[asyncio.Task[None]] = []
        self.counts: dict[str, int] = {}
        self.done: dict[str, asyncio.Event] = {}
        self.last: dict[str, float] = {}
        self.sample: str | None = None

    async def connect(self, url: str, hello: str | None, compression: bool) -> None:
        gate = asyncio.Semaphore(100)

        async def one() -> None:
            async with gate:
                ws = await open_client(url, hello, compression, max_queue=None)
            self.sockets.append(ws)
            self.readers.append(asyncio.create_task(self._read(ws)))

        await asyncio.gather(*(one() for _ in range(self.size)))

    def expect(self, marker: str) -> asyncio.Event:
        self.counts[marker] = 0
        self.done[marker] = asyncio.Event()
        return self.done[marker]

    async def _read(self, ws: ClientConnection) -> None:
        with contextlib.suppress(websockets.ConnectionClosed, asyncio.CancelledError):
            async for message in ws:
                now = time.perf_counter()
                text = message if isinstance(message, str) else message.decode()
                frame = _decode(text)
                for env in frame.envelopes:
                    marker = env.command_id
                    if marker is None or marker not in self.counts:
                        continue
                    if self.sample is None:
                        self.sample = text
                    self.counts[marker] += 1
                    self.last[marker] = now
                    if self.counts[marker] >= self.size:
                        self.done[marker].set()

    async def close(self) -> None:
        await close_clients(self.sockets, self.readers)


async def measure_ours(url: str, size: int, rounds: int, compression: bool, pid: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        created = (await http.post("/games", json={"players": ["Ada"]})).json()
    game_id, token = created["game_id"], created["seats"][0]["token"]
    ws_url = url.replace("http://", "ws://") + f"/games/{game_id}/ws"
    audience = Audience(size)
    await audience.connect(ws_url, json.dumps({"type": "hello", "token": None, "since": None}), compression)
    player = await websockets.connect(ws_url, max_size=None, ping_interval=None, compression=None)
    await player.send(json.dumps({"type": "hello", "token": token, "since": None}))
    await player.recv()
    times: list[float] = []
    acks: list[float] = []
    meter = CpuMeter(pid)
    cpu = 0.0
    try:
        for index in range(rounds + 2):  # two warm-up rounds
            cid = f"fan{index}"
            done = audience.expect(cid)
            frame = {
                "type": "place",
                "id": cid,
                "token": {"kind": "performance", "era": "classical"},
                "space": "viola",
            }
            meter.start()
            started = time.perf_counter()
            await player.send(json.dumps(frame))
            while True:  # the answer (the player also receives the events frame)
                answer = json.loads(await asyncio.wait_for(player.recv(), 30))
                if answer.get("type") in ("accepted", "rejected"):
                    break
            acked = time.perf_counter()
            await asyncio.wait_for(done.wait(), 60)
            used = meter.stop()["cpu_seconds"]
            if index >= 2:
                times.append(audience.last[cid] - started)
                acks.append(acked - started)
                cpu += used
            await asyncio.sleep(0.1)
        sample = audience.sample or ""
    finally:
        await player.close()
        await audience.close()
    return _stats(times) | {
        "ack_ms_median": statistics.median(acks) * 1e3,
        "server_cpu_ms_per_round": cpu / rounds * 1e3,
        "frame_bytes": len(sample),
        "frame": sample,
    }


async def measure_broadcast(
    url: str, size: int, rounds: int, compression: bool, frame: str, pid: int
) -> dict[str, Any]:
    audience = Audience(size)
    await audience.connect(url, None, compression)
    trigger = await websockets.connect(url, max_size=None, ping_interval=None, compression=None)
    await trigger.send("trigger")
    times: list[float] = []
    meter = CpuMeter(pid)
    cpu = 0.0
    try:
        for index in range(rounds + 2):
            cid = f"fan{index}"
            text = _with_marker(frame, cid)
            done = audience.expect(cid)
            meter.start()
            started = time.perf_counter()
            await trigger.send(text)
            await asyncio.wait_for(done.wait(), 60)
            used = meter.stop()["cpu_seconds"]
            if index >= 2:
                times.append(audience.last[cid] - started)
                cpu += used
            await asyncio.sleep(0.1)
    finally:
        await trigger.close()
        await audience.close()
    return _stats(times) | {"server_cpu_ms_per_round": cpu / rounds * 1e3, "frame_bytes": len(frame)}


def _with_marker(frame: str, marker: str) -> str:
    """The captured frame with its command id replaced by `marker` (same shape, near-same size)."""
    decoded = msgspec.json.decode(frame)
    for envelope in decoded["envelopes"]:
        envelope["command_id"] = marker
    return msgspec.json.encode(decoded).decode()


def _stats(times: list[float]) -> dict[str, Any]:
    return {
        "rounds": len(times),
        "median_ms": statistics.median(times) * 1e3,
        "min_ms": min(times) * 1e3,
        "max_ms": max(times) * 1e3,
        "samples_ms": [t * 1e3 for t in times],
    }


def measure_writer(redis_url: str, size: int, rounds: int) -> dict[str, Any]:
    """Ours with the direct write and without it, without compression: the pooled medians and ratios."""
    import uvloop

    runs: dict[str, list[dict[str, Any]]] = {"direct": [], "asgi": []}
    for mode in ("direct", "asgi", "asgi", "direct"):
        with ServerProcess("ours", redis_url, env=WRITER_MODES[mode]) as server:
            run = uvloop.run(measure_ours(server.url, size, rounds, False, server.pid))
        run.pop("frame")
        runs[mode].append(run)
        say(f"fanout writer {mode}: {run['median_ms']:.1f} ms, CPU {run['server_cpu_ms_per_round']:.1f} ms")
    pooled = {
        mode: {
            "median_ms": statistics.median(t for run in found for t in run["samples_ms"]),
            "server_cpu_ms_per_round": statistics.mean(run["server_cpu_ms_per_round"] for run in found),
        }
        for mode, found in runs.items()
    }
    time_ratio = ratio(pooled["direct"]["median_ms"], pooled["asgi"]["median_ms"])
    cpu_ratio = ratio(pooled["direct"]["server_cpu_ms_per_round"], pooled["asgi"]["server_cpu_ms_per_round"])
    return {
        "runs": runs,
        "pooled": pooled,
        "time_direct_to_asgi": time_ratio,
        "cpu_direct_to_asgi": cpu_ratio,
        "buys_more_than_10_percent": 0 < time_ratio <= 1 - WRITER_GOAL or 0 < cpu_ratio <= 1 - WRITER_GOAL,
    }


# The baseline server ----------------------------------------------------------------------------------


async def _broadcast_server(port: int) -> None:
    from websockets.asyncio.server import ServerConnection, broadcast, serve

    audience: set[ServerConnection] = set()

    async def handler(ws: ServerConnection) -> None:
        audience.add(ws)
        try:
            async for message in ws:
                if message == "trigger":
                    audience.discard(ws)
                    continue
                broadcast(audience, message)
        except websockets.ConnectionClosed:
            pass
        finally:
            audience.discard(ws)

    async with serve(
        # permessage-deflate declined, as `orchestra serve` declines it by default: with clients offering
        # it, the baseline would otherwise compress for every connection what ours sends plain.
        handler,
        "127.0.0.1",
        port,
        max_size=None,
        ping_interval=None,
        compression=None,
    ) as server:
        bound = next(iter(server.sockets)).getsockname()[1]
        print(f"Broadcast server running at http://127.0.0.1:{bound}/", flush=True)
        await asyncio.Future()


class BroadcastProcess:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.fanout", "serve-broadcast", "--port", "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if "running at" not in line:
            self.stop()
            raise RuntimeError("the broadcast server did not start")
        self.url = line.rsplit(" ", 1)[1].strip().rstrip("/").replace("http://", "ws://")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


# The benchmark ----------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: 100 spectators, 3 rounds")
    parser.add_argument("--spectators", type=int, default=1000)
    # Single rounds swing widely on a shared machine: the median of many.
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--writer", action="store_true", help="also ours without the direct write of shared frames"
    )


def main(args: argparse.Namespace, argv: list[str]) -> int:
    import uvloop

    limit = raise_nofile(20_000)
    size, rounds = (100, 3) if args.quick else (args.spectators, args.rounds)
    modes = [False] if args.quick else [False, True]
    results: dict[str, Any] = {}
    with RedisServer() as redis:
        for compression in modes:
            label = "deflate" if compression else "no_compression"
            with ServerProcess("ours", redis.url) as server:
                ours = uvloop.run(measure_ours(server.url, size, rounds, compression, server.pid))
            frame = ours.pop("frame")
            baseline = BroadcastProcess()
            try:
                theirs = uvloop.run(
                    measure_broadcast(baseline.url, size, rounds, compression, frame, baseline.process.pid)
                )
            finally:
                baseline.stop()
            figure = ratio(ours["median_ms"], theirs["median_ms"])
            results[label] = {"ours": ours, "websockets_broadcast": theirs, "ratio_median": figure}
            say(
                f"fanout {label} to {size}: ours {ours['median_ms']:.1f} ms "
                f"(ack {ours['ack_ms_median']:.2f} ms), "
                f"broadcast() {theirs['median_ms']:.1f} ms, ratio {figure:.2f}"
            )
        # --quick weighs it too, so that the quick run covers every path of the benchmark.
        writer = measure_writer(redis.url, size, rounds) if args.writer or args.quick else None
    headline = results["no_compression"]["ratio_median"]
    summary = {
        "spectators": size,
        "ratio_no_compression": headline,
        "ratio_deflate": results.get("deflate", {}).get("ratio_median"),
        "goal": f"time until all {size} spectators have the event <= {GOAL}x websockets broadcast()",
        "goal_met_no_compression": 0 < headline <= GOAL,
        "goal_met_deflate": (0 < results["deflate"]["ratio_median"] <= GOAL)
        if "deflate" in results
        else None,
    }
    if writer is not None:
        summary["writer"] = {key: value for key, value in writer.items() if key != "runs"}
        results["writer"] = writer
    path = write_result(
        "fanout", {"quick": args.quick, "nofile_limit": limit, "summary": summary, "results": results}, argv
    )
    print(f"fanout: ratio {headline:.2f} without compression (goal <= {GOAL}); wrote {path}")
    if writer is not None:
        print(
            "fanout writer: with/without the direct write: time to all "
            f"{writer['time_direct_to_asgi']:.2f}x, server CPU {writer['cpu_direct_to_asgi']:.2f}x"
        )
    return 0


def _serve_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fanout")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve-broadcast")
    serve.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    raise_nofile(20_000)
    # The default asyncio loop, as `orchestra serve` runs.
    # The event loop our server runs on (uvloop), so that the loop is not what differs.
    run_on_servers_loop(_broadcast_server(args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(_serve_main(sys.argv[1:]))
