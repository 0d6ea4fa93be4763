"""Slowloris: one address holds thousands of half-sent requests while another asks for /healthz.

    python -m bench slowloris [--quick] [--connections 10000] [--seconds 10] [--runs defaults,cycled,held]

One redis-server, and for each run an `orchestra serve` of its own. An attacker, a child process so that
its CPU is not in the probe's event loop (`python -m bench.slowloris attack ...`), opens `--connections`
connections from 127.0.0.1, sends half a request head on each and one more header line every second,
and opens again (a second later) each connection the server closes. Once it holds all it can, a probe
from 127.0.0.2 asks for GET /healthz on a new connection every 100 ms for `--seconds`: its wait runs from
the connect to the whole response. The goal: the worst wait under 2 s, in every run.

The runs, each against a fresh node:

- `defaults`: the node's default limits: the attacker keeps the per-address limit's worth of connections
  (1,000), the rest are refused at once, and it tries them again every second;
- `cycled`: no per-address limit (as behind a proxy): the node holds every connection until its request
  deadline (5 s), then closes it, and the attacker opens it again;
- `held`: no per-address limit and an hour's request deadline: the node holds them all the while.

Reported: the probe's p50/p99/max wait and failures, the attacker's counts (opened, refused at once,
closed later; held, that is kept by the node for a second or more, at each second of the probe and at
most), the node's refusals (`orchestra_connections_refused_total`), its RSS and open descriptors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import psutil

from bench.common import ROOT, RedisServer, ServerProcess, percentiles, raise_nofile, say, write_result
from server.config import Settings

GOAL_SECONDS = 2.0
ATTACKER = "127.0.0.1"
PROBE = "127.0.0.2"
SCRAPER = "127.0.0.3"
# A slowloris holds connections rather than flooding: it waits this long before opening a closed one again.
REOPEN_SECONDS = 1.0
TRICKLE_SECONDS = 1.0
REFUSED_WITHIN = 0.5  # a close this soon after the connect is a refusal
BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)  # Linux's value, for Python < 3.12


# The attacker (a child process) -------------------------------------------------------------------------


class _HalfSent(asyncio.Protocol):
    """One attacking connection: half a request head, then whatever the trickle adds; ends when closed."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.closed: asyncio.Future[None] = loop.create_future()
        self.opened = loop.time()
        self.lines = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(b"GET /healthz HTTP/1.1\r\nhost: slowloris\r\n")  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        pass  # an answer (431, or a response to a finished head) is not read: the close follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def attack(port: int, connections: int, seconds: float) -> None:
    """Hold `connections` half-sent requests to 127.0.0.1:`port` for `seconds`; a JSON status line on stdout
    every second. A connection the server has kept for a second is held; from then on it gets one more
    header line every second."""
    loop = asyncio.get_running_loop()
    stop = loop.time() + seconds
    counts: Counter[str] = Counter()
    state = {"held": 0, "most_held": 0}
    live: set[_HalfSent] = set()
    # Connects in flight at once, as tokens in a queue (a Semaphore's acquire scans all its waiters).
    tokens: asyncio.Queue[None] = asyncio.Queue()
    for _ in range(512):
        tokens.put_nowait(None)

    async def hold() -> None:
        while loop.time() < stop:
            await tokens.get()
            # A socket of its own, bound and connected by hand: no name lookups on the way, and its port
            # chosen at the connect (Linux's bind to port 0 searches longer the more sockets are bound).
            sock = socket.socket()
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_IP, BIND_ADDRESS_NO_PORT, 1)
                sock.bind((ATTACKER, 0))
                await loop.sock_connect(sock, ("127.0.0.1", port))
                _, connection = await loop.create_connection(lambda: _HalfSent(loop), sock=sock)
            except OSError:
                sock.close()
                counts["connect_errors"] += 1
                await asyncio.sleep(REOPEN_SECONDS)
                continue
            finally:
                tokens.put_nowait(None)
            counts["opened"] += 1
            live.add(connection)
            await connection.closed
            live.discard(connection)
            if connection.lines:
                state["held"] -= 1
            counts["refused" if loop.time() - connection.opened < REFUSED_WITHIN else "closed_later"] += 1
            await asyncio.sleep(REOPEN_SECONDS)

    holders = [asyncio.ensure_future(hold()) for _ in range(connections)]
    while loop.time() < stop:
        await asyncio.sleep(TRICKLE_SECONDS)
        now = loop.time()
        for connection in list(live):
            transport = connection.transport
            if transport is None or transport.is_closing() or now - connection.opened < TRICKLE_SECONDS:
                continue
            if not connection.lines:
                state["held"] += 1
            transport.write(b"x-%d: y\r\n" % connection.lines)
            connection.lines += 1
        state["most_held"] = max(state["most_held"], state["held"])
        print(json.dumps({**state, **counts}), flush=True)
    for holder in holders:
        holder.cancel()
    for connection in live:
        if connection.transport is not None:
            connection.transport.close()


class Attacker:
    """The attacker's child process, and its latest status line."""

    def __init__(self, port: int, connections: int, seconds: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.slowloris", "attack", str(port), str(connections), str(seconds)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        self.status: dict[str, Any] = {}
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.status = json.loads(line)
            self.lines.append((time.monotonic(), self.status))

    def held_between(self, start: float, end: float) -> list[int]:
        """The connections it held, by second, between two moments."""
        return [status["held"] for at, status in self.lines if start <= at <= end]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


# The probe ---------------------------------------------------------------------------------------------


async def exchange(
    host: str, port: int, source: str, request: bytes, timeout: float = 30.0
) -> tuple[bytes, float]:
    """One request on a new connection from `source`: the whole response (up to the server's close), and
    the seconds its connect took."""
    async with asyncio.timeout(timeout):
        started = time.perf_counter()
        reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
        connected = time.perf_counter() - started
        try:
            writer.write(request)
            return await reader.read(-1), connected
        finally:
            writer.close()


async def probe(host: str, port: int, seconds: float) -> dict[str, Any]:
    """GET /healthz from 127.0.0.2 every 100 ms for `seconds`: each wait (and its connect's), and the
    failures."""
    request = b"GET /healthz HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n"
    waits: list[float] = []
    connects: list[float] = []
    failures: Counter[str] = Counter()
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.perf_counter()
        try:
            response, connected = await exchange(host, port, PROBE, request)
        except (OSError, TimeoutError) as exc:
            failures[type(exc).__name__] += 1
        else:
            if response.startswith(b"HTTP/1.1 200 "):
                waits.append(time.perf_counter() - started)
                connects.append(connected)
            else:
                failures[response[:12].decode(errors="replace") or "closed"] += 1
        await asyncio.sleep(0.1)
    return {"wait_ms": percentiles(waits), "connect_ms": percentiles(connects), "failures": dict(failures)}


async def refusals(host: str, port: int) -> dict[str, float]:
    """The node's orchestra_connections_refused_total by reason."""
    request = b"GET /metrics HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n"
    text = (await exchange(host, port, SCRAPER, request))[0].decode()
    pattern = r'^orchestra_connections_refused_total\{reason="(\w+)"\} ([0-9.e+]+)$'
    return {reason: float(value) for reason, value in re.findall(pattern, text, re.M)}


# The benchmark ----------------------------------------------------------------------------------------


def one_run(
    name: str, redis_url: str, env: dict[str, str], connections: int, seconds: float, target: int
) -> dict[str, Any]:
    """A node with `env`, the attacker's `connections`, and the probe for `seconds` once it has held
    `target` of them (or has tried for a while)."""
    import uvloop

    ramp = 60.0 if connections > 1000 else 10.0
    with ServerProcess("ours", redis_url, env) as server:
        parts = urlsplit(server.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 0
        node = psutil.Process(server.pid)
        attacker = Attacker(port, connections, ramp + seconds + 5)
        try:
            # The attacker's connections first: the probe starts once it holds as many as it can.
            settled_at = time.monotonic() + ramp
            while time.monotonic() < settled_at and attacker.status.get("most_held", 0) < target:
                time.sleep(0.2)
            rss, descriptors = [], []
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.is_set():
                    with contextlib.suppress(psutil.Error):
                        rss.append(node.memory_info().rss / 2**20)
                        descriptors.append(node.num_fds())
                    time.sleep(0.5)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            probed = uvloop.run(probe(host, port, seconds))
            held = attacker.held_between(started, time.monotonic())
            sampling.set()
            sampler.join(5)
            attacked = attacker.status
        finally:
            attacker.stop()
        refused = uvloop.run(refusals(host, port))
    worst = probed["wait_ms"]["max"]
    say(
        f"slowloris {name}: attacker held {min(held, default=0)}-{max(held, default=0)} while probed "
        f"(most {attacked.get('most_held')}), opened {attacked.get('opened', 0)}, refused at once "
        f"{attacked.get('refused', 0)}, closed later {attacked.get('closed_later', 0)}; probe p50/p99/max "
        f"{probed['wait_ms']['p50']:.1f}/{probed['wait_ms']['p99']:.1f}/{worst:.1f} ms "
        f"(connect max {probed['connect_ms']['max']:.1f} ms), "
        f"failures {probed['failures']}; node refusals {refused}"
    )
    return {
        "env": env,
        "attacker": {**attacked, "held_while_probed": held},
        "probe": probed,
        "node_refused": refused,
        "node_rss_mib_max": max(rss, default=0.0),
        "node_descriptors_max": max(descriptors, default=0),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: 300 connections, 2 s of probes")
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", default="defaults,cycled,held", help="which runs (default: all three)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    limit = raise_nofile(20_000)
    connections, seconds = (300, 2.0) if args.quick else (args.connections, args.seconds)
    # In the quick run the per-address limit is a third of the attacker's connections (1,000 is a tenth
    # of the full run's), and the deadline shorter, so that connections cycle within the run.
    per_address = 100 if args.quick else Settings().max_connections_per_address
    deadline = "2" if args.quick else str(Settings().request_timeout)
    runs = {
        "defaults": (
            {"ORCHESTRA_MAX_CONNECTIONS_PER_ADDRESS": str(per_address)},
            min(per_address, connections),
        ),
        "cycled": (
            {"ORCHESTRA_MAX_CONNECTIONS_PER_ADDRESS": "0", "ORCHESTRA_REQUEST_TIMEOUT": deadline},
            connections,
        ),
        "held": (
            {"ORCHESTRA_MAX_CONNECTIONS_PER_ADDRESS": "0", "ORCHESTRA_REQUEST_TIMEOUT": "3600"},
            connections,
        ),
    }
    chosen = args.runs.split(",")
    with RedisServer() as redis:
        results = {
            name: one_run(name, redis.url, env, connections, seconds, target)
            for name, (env, target) in runs.items()
            if name in chosen
        }
    worst = max(run["probe"]["wait_ms"]["max"] for run in results.values())
    failed = sum(sum(run["probe"]["failures"].values()) for run in results.values())
    summary = {
        "connections": connections,
        "worst_wait_ms": worst,
        "probe_failures": failed,
        "goal": f"GET /healthz from another address answered within {GOAL_SECONDS} s, in every run",
        "goal_met": failed == 0 and 0 < worst < GOAL_SECONDS * 1000,
    }
    path = write_result(
        "slowloris", {"quick": args.quick, "nofile_limit": limit, "summary": summary, "runs": results}, argv
    )
    print(f"slowloris: worst wait {worst:.1f} ms, {failed} failed probes (goal < {GOAL_SECONDS} s); {path}")
    return 0


def _attack_main(argv: list[str]) -> int:
    import uvloop

    parser = argparse.ArgumentParser(prog="python -m bench.slowloris")
    sub = parser.add_subparsers(dest="command", required=True)
    attacker = sub.add_parser("attack")
    attacker.add_argument("port", type=int)
    attacker.add_argument("connections", type=int)
    attacker.add_argument("seconds", type=float)
    args = parser.parse_args(argv)
    raise_nofile(20_000)
    uvloop.run(attack(args.port, args.connections, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(_attack_main(sys.argv[1:]))
