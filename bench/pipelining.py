"""Pipelining: many connections each send thousands of pipelined requests and never read an answer.

    python -m bench pipelining [--quick] [--connections 200] [--requests 5000] [--seconds 30]

One redis-server and one `orchestra serve` (the default limits). An attacker, a child process so that
its CPU is not in the probe's (`python -m bench.pipelining attack ...`), opens `--connections`
connections from 127.0.0.1, each with a 4 KiB receive window (SO_RCVBUF) that it never reads, and sends
on each `--requests` pipelined `GET /client/orchestra.js` at once; it keeps them open for `--seconds`,
then closes them. Meanwhile a probe from 127.0.0.2 asks for GET /metrics on a new connection every
100 ms (its wait runs from the connect to the whole response) and the node's RSS is sampled. The goal:
the node's RSS under 200 MiB and every /metrics answered within a second, throughout; and its RSS back
near where it started once the attacker has gone.

Reported: the node's RSS before, at most, and after; the probe's p50/p99/max wait and failures; the
node's open connections (`orchestra_tcp_connections`, from each probe: the attacker's are cut once the
kernel's buffers are full and the send deadline has passed); its refusals
(`orchestra_connections_refused_total`, `send_timeout` among them).
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

GOAL_RSS_MIB = 200.0
GOAL_WAIT_SECONDS = 1.0
ATTACKER = "127.0.0.1"
PROBE = "127.0.0.2"
REQUEST = b"GET /client/orchestra.js HTTP/1.1\r\nhost: bench\r\n\r\n"
RECEIVE_WINDOW = 4096
STATUS_SECONDS = 0.5


# The attacker (a child process) -------------------------------------------------------------------------


class _NeverReads(asyncio.Protocol):
    """One attacking connection: its requests written at once; nothing of the answers read."""

    def __init__(self, payload: bytes, counts: Counter[str]) -> None:
        self.payload = payload
        self.counts = counts
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.pause_reading()  # type: ignore[attr-defined]
        transport.write(self.payload)  # type: ignore[attr-defined]
        self.counts["open"] += 1

    def data_received(self, data: bytes) -> None:
        # A loop may start reading after connection_made: paused again, and what came is counted.
        self.counts["read_bytes"] += len(data)
        if self.transport is not None:
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.counts["open"] -= 1
        self.counts["cut"] += 1


async def attack(port: int, connections: int, requests: int, seconds: float) -> None:
    """`connections` never-reading connections to 127.0.0.1:`port`, each sending `requests` pipelined
    requests, held for `seconds`; a JSON status line on stdout every half second."""
    loop = asyncio.get_running_loop()
    counts: Counter[str] = Counter()
    payload = REQUEST * requests
    protocols: list[_NeverReads] = []

    async def one() -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_WINDOW)
        sock.setblocking(False)
        try:
            sock.bind((ATTACKER, 0))
            await loop.sock_connect(sock, ("127.0.0.1", port))
            transport, protocol = await loop.create_connection(
                lambda: _NeverReads(payload, counts), sock=sock
            )
            transport.pause_reading()
        except OSError:
            sock.close()
            counts["connect_errors"] += 1
            return
        protocols.append(protocol)

    await asyncio.gather(*(one() for _ in range(connections)))
    counts["connected"] = len(protocols)
    stop = loop.time() + seconds
    while True:
        unsent = sum(p.transport.get_write_buffer_size() for p in protocols if p.transport is not None)
        print(json.dumps({**counts, "unsent_bytes": unsent}), flush=True)
        if loop.time() >= stop:
            break
        await asyncio.sleep(STATUS_SECONDS)
    for protocol in protocols:
        if protocol.transport is not None:
            protocol.transport.abort()


class Attacker:
    """The attacker's child process, and its latest status line."""

    def __init__(self, port: int, connections: int, requests: int, seconds: float) -> None:
        command = [sys.executable, "-m", "bench.pipelining", "attack", str(port)]
        command += [str(connections), str(requests), str(seconds)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.status: dict[str, Any] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.status = json.loads(line)

    def wait(self, timeout: float) -> None:
        """Until the attacker has closed its connections and exited."""
        try:
            self.process.wait(timeout)
        finally:
            self.stop()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()


# The probe and the measure -----------------------------------------------------------------------------


def scrape(host: str, port: int, timeout: float = 10.0) -> tuple[str, float]:
    """GET /metrics on a new connection from 127.0.0.2: the body, and the seconds the whole took."""
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=timeout, source_address=(PROBE, 0)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    response = b"".join(chunks)
    if not response.startswith(b"HTTP/1.1 200 "):
        raise OSError(f"answered {response[:12]!r}")
    return response.split(b"\r\n\r\n", 1)[1].decode(), time.perf_counter() - started


def refusals(text: str) -> dict[str, float]:
    """orchestra_connections_refused_total by reason, from a /metrics text."""
    pattern = r'^orchestra_connections_refused_total\{reason="(\w+)"\} ([0-9.e+]+)$'
    return {reason: float(value) for reason, value in re.findall(pattern, text, re.M)}


def open_connections(text: str) -> float:
    """orchestra_tcp_connections, from a /metrics text."""
    found = re.search(r"^orchestra_tcp_connections ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else -1.0


def held_by_ten_seconds(held: list[tuple[float, float]]) -> str:
    """The node's open connections at each tenth second of the run, as `10 s: 201, 20 s: 201, ...`."""
    shown, mark = [], 10.0
    for at, count in held:
        if at >= mark:
            shown.append(f"{mark:.0f} s: {count:.0f}")
            mark += 10.0
    return ", ".join(shown)


def measure(url: str, pid: int, connections: int, requests: int, seconds: float) -> dict[str, Any]:
    """The attack on the node at `url` (process `pid`) for `seconds`, probed and sampled throughout,
    then its RSS once the attacker has gone."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 0
    node = psutil.Process(pid)
    rss_before = node.memory_info().rss / 2**20
    rss: list[float] = []
    waits: list[float] = []
    failures: Counter[str] = Counter()
    held: list[tuple[float, float]] = []  # (seconds, the node's open connections, the probe's among them)
    done = threading.Event()
    began = time.monotonic()

    def sample() -> None:
        while not done.is_set():
            with contextlib.suppress(psutil.Error):
                rss.append(node.memory_info().rss / 2**20)
            time.sleep(0.05)

    def probe() -> None:
        while not done.is_set():
            try:
                text, wait = scrape(host, port)
                waits.append(wait)
                held.append((round(time.monotonic() - began, 1), open_connections(text)))
            except (OSError, TimeoutError) as exc:
                failures[type(exc).__name__] += 1
            time.sleep(0.1)

    threads = [threading.Thread(target=sample, daemon=True), threading.Thread(target=probe, daemon=True)]
    for thread in threads:
        thread.start()
    attacker = Attacker(port, connections, requests, seconds)
    try:
        attacker.wait(seconds + 60)
    finally:
        done.set()
        for thread in threads:
            thread.join(15)
    attacked = attacker.status
    # The node frees what the attack cost once its connections are gone (the attacker's close is
    # seen at once; the memory's return to the system may take a moment).
    time.sleep(2.0)
    rss_after = node.memory_info().rss / 2**20
    text, _ = scrape(host, port)
    return {
        "connections": connections,
        "requests_per_connection": requests,
        "seconds": seconds,
        "attacker": attacked,
        "rss_mib": {"before": rss_before, "max": max(rss, default=rss_before), "after": rss_after},
        "metrics_wait_ms": percentiles(waits),
        "metrics_failures": dict(failures),
        "metrics_probes": len(waits),
        "node_refused": refusals(text),
        "node_connections": held,
        "node_connections_after": open_connections(text),
    }


# The benchmark ----------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: 50 connections, 6 s")
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the attacker holds on")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    raise_nofile(20_000)
    connections, seconds = (50, 6.0) if args.quick else (args.connections, args.seconds)
    # The node's own limits (as deployed without a proxy), not the benchmarks' usual ones.
    env = {"ORCHESTRA_MAX_CONNECTIONS_PER_ADDRESS": "1000"}
    with RedisServer() as redis, ServerProcess("ours", redis.url, env) as server:
        result = measure(server.url, server.pid, connections, args.requests, seconds)
    rss, wait = result["rss_mib"], result["metrics_wait_ms"]
    failed = sum(result["metrics_failures"].values())
    goal_met = rss["max"] < GOAL_RSS_MIB and failed == 0 and 0 < wait["max"] < GOAL_WAIT_SECONDS * 1000
    summary = {
        "goal": f"RSS under {GOAL_RSS_MIB:.0f} MiB, GET /metrics within {GOAL_WAIT_SECONDS:.0f} s throughout",
        "goal_met": goal_met,
    }
    path = write_result("pipelining", {"quick": args.quick, "summary": summary, "run": result}, argv)
    say(
        f"pipelining: {connections} connections x {args.requests} requests "
        f"({connections * args.requests * len(REQUEST) / 1e6:.0f} MB), never read, for {seconds:.0f} s: "
        f"RSS {rss['before']:.0f} -> max {rss['max']:.0f} -> after {rss['after']:.0f} MiB; /metrics "
        f"p50/p99/max {wait['p50']:.1f}/{wait['p99']:.1f}/{wait['max']:.1f} ms over "
        f"{result['metrics_probes']} probes, {failed} failed; the node's connections "
        f"{held_by_ten_seconds(result['node_connections'])}, {result['node_connections_after']:.0f} after; "
        f"node refusals {result['node_refused']}"
    )
    print(f"pipelining: goal {'met' if goal_met else 'NOT met'}; {path}")
    return 0


def _attack_main(argv: list[str]) -> int:
    import uvloop

    parser = argparse.ArgumentParser(prog="python -m bench.pipelining")
    sub = parser.add_subparsers(dest="command", required=True)
    attacker = sub.add_parser("attack")
    attacker.add_argument("port", type=int)
    attacker.add_argument("connections", type=int)
    attacker.add_argument("requests", type=int)
    attacker.add_argument("seconds", type=float)
    args = parser.parse_args(argv)
    raise_nofile(20_000)
    uvloop.run(attack(args.port, args.connections, args.requests, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(_attack_main(sys.argv[1:]))
