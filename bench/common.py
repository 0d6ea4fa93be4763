"""Shared pieces of the benchmarks: child processes (redis-server, our server, the minimal server),
process CPU and memory readings, percentiles and the JSON results.

Every figure is meant to be read as a ratio against a baseline measured in the same run: the machines
this runs on are small, shared and noisy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil
import redis
import websockets
from websockets.asyncio.client import ClientConnection

from bench.child import ChildServer
from server.ops.embedded_redis import find_redis_server

ROOT = Path(__file__).resolve().parents[1]
# BENCH_RESULTS_DIR redirects the JSON files (the CI test writes its quick results to a temporary directory).
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR") or ROOT / "bench" / "results")

# Our server, as a benchmark drives it: placements unlimited, no per-connection rate limit (the load
# generator is not a hostile client), everything else at its defaults.
SERVER_ENV = {
    "ORCHESTRA_MAX_PLACEMENTS": "1000000",
    "ORCHESTRA_RATE_PER_SECOND": "1000000",
    "ORCHESTRA_RATE_BURST": "1000000",
    "ORCHESTRA_QUEUE_LIMIT": "100000",
    # The load generator creates its games as fast as it can: no per-address creation rate.
    "ORCHESTRA_CREATE_RATE_PER_MINUTE": "0",
    # Every client of a benchmark connects from 127.0.0.1.
    "ORCHESTRA_MAX_CONNECTIONS_PER_ADDRESS": "0",
}


def raise_nofile(wanted: int = 20_000) -> int:
    """Raise RLIMIT_NOFILE towards `wanted` (children inherit it); returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """A redis-server child on a free loopback port, in a temporary directory (never the shared 6379)."""

    def __init__(self, *, fsync_always: bool = False) -> None:
        self.fsync_always = fsync_always
        self.directory = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def durability(self) -> str:
        """The durability setting, in words."""
        return "appendonly yes, appendfsync always" if self.fsync_always else "appendonly no (memory only)"

    def start(self) -> RedisServer:
        args = [find_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.directory), "--save", "", "--logfile", "redis.log"]
        if self.fsync_always:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        with redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1) as client:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.process.returncode}")
                try:
                    if client.ping():
                        break
                except redis.RedisError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not answer PING")
                time.sleep(0.02)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServerProcess(ChildServer):
    """A websocket server child that prints "running at URL": ours (`orchestra serve`) or the minimal one."""

    def __init__(
        self,
        kind: str,
        redis_url: str,
        env: dict[str, str] | None = None,
        args: Sequence[str] = (),
        wrapper: Sequence[str] = (),
        timeout: float = 30.0,
        tree: Path = ROOT,
    ) -> None:
        """`wrapper` goes before the server's command (a profiler's, say); `timeout` bounds its start;
        `tree` is the checkout whose code it runs (another commit's worktree, to compare with it)."""
        if kind not in ("ours", "minimal"):
            raise ValueError(f"unknown server kind {kind!r}")
        self.kind = kind
        self.directory = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
        child_env.update(SERVER_ENV)
        child_env["ORCHESTRA_DATA_DIR"] = str(self.directory / "var")
        child_env.update(env or {})
        module = "server.ops.cli" if kind == "ours" else "bench.minimal"
        command = [*wrapper, sys.executable, "-m", module, "serve", "--port", "0", "--redis-url", redis_url]
        command += args
        # `python -m` puts its working directory first on the path: the tree's packages are the ones run.
        super().__init__(command, child_env, self.directory / "server.log", cwd=tree, timeout=timeout)

    def __enter__(self) -> ServerProcess:
        return self


@dataclass(frozen=True)
class Callgrind:
    """valgrind's callgrind, to count a program's instructions between `callgrind_control --instr=on` and
    `--instr=off` (none before): deterministic where timings are not."""

    valgrind: str
    control: str

    @classmethod
    def find(cls) -> Callgrind | None:
        """The installed tools; None without valgrind."""
        valgrind, control = shutil.which("valgrind"), shutil.which("callgrind_control")
        return None if valgrind is None or control is None else cls(valgrind, control)

    def wrapper(self, simulate: bool = False) -> list[str]:
        """What goes before a program's command; `simulate` also simulates caches and branch prediction."""
        wrapper = [self.valgrind, "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null"]
        return wrapper + (["--cache-sim=yes", "--branch-sim=yes"] if simulate else [])

    def counting(self, pid: int, on: bool) -> None:
        """Turn counting on or off in the running program `pid`."""
        instrument = "--instr=on" if on else "--instr=off"
        subprocess.run([self.control, instrument, str(pid)], capture_output=True, check=True)

    @staticmethod
    def collected(log: str) -> list[int]:
        """The counts callgrind writes to the program's stderr as it exits (instructions first).
        Raises: RuntimeError when there are none (the program did not exit under callgrind)."""
        found = re.findall(r"Collected : ([\d ]+)", log)
        if not found:
            raise RuntimeError(f"no instruction count from callgrind: {log[-500:]}")
        return [int(number) for number in found[-1].split()]


class CpuMeter:
    """User+system CPU seconds and RSS of one process (by pid), as a delta over an interval."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self._user0 = self._system0 = 0.0
        self._wall0 = 0.0

    def rss(self) -> int:
        return int(self.process.memory_info().rss)

    def start(self) -> None:
        times = self.process.cpu_times()
        self._user0, self._system0, self._wall0 = times.user, times.system, time.perf_counter()

    def stop(self) -> dict[str, float]:
        """CPU seconds since `start`, and apart: in the process itself (user) and in the kernel for it
        (system: its sockets' writes and reads among them)."""
        times = self.process.cpu_times()
        user, system = times.user - self._user0, times.system - self._system0
        cpu, wall = user + system, time.perf_counter() - self._wall0
        return {
            "cpu_seconds": cpu,
            "user_seconds": user,
            "system_seconds": system,
            "wall_seconds": wall,
            "core_share": cpu / wall if wall else 0.0,
        }


def percentiles(samples: Sequence[float], scale: float = 1e3) -> dict[str, float]:
    """p50/p90/p99/max/mean of `samples` (seconds), in milliseconds by default; zeros when empty."""
    if not samples:
        return {"count": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0, "mean": 0.0}
    ordered = sorted(samples)
    n = len(ordered)

    def at(q: float) -> float:
        return ordered[min(n - 1, int(q * n))] * scale

    return {
        "count": n,
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "max": ordered[-1] * scale,
        "mean": statistics.fmean(ordered) * scale,
    }


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, 0 when the denominator is 0."""
    return numerator / denominator if denominator else 0.0


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    load1, load5, _ = os.getloadavg()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "loadavg_1m_5m": [round(load1, 2), round(load5, 2)],
        "redis_server": find_redis_server(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def write_result(name: str, payload: dict[str, Any], argv: Sequence[str] | None = None) -> Path:
    """bench/results/<name>.json with the raw numbers, the ratios, the command and the machine."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    document = {
        "benchmark": name,
        "command": command.strip(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        **payload,
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    return path


def say(message: str) -> None:
    """Progress on stderr (results go to the JSON file and a summary to stdout)."""
    print(message, file=sys.stderr, flush=True)


async def open_client(url: str, hello: str | None, compression: bool, **options: Any) -> ClientConnection:
    """A benchmark's websocket client: connected, its hello sent and the welcome read (when `hello`)."""
    ws = await websockets.connect(
        url,
        max_size=None,
        open_timeout=60,
        close_timeout=2,
        ping_interval=None,
        compression="deflate" if compression else None,
        **options,
    )
    if hello is not None:
        await ws.send(hello)
        await asyncio.wait_for(ws.recv(), 30)  # the welcome
    return ws


class Closable(Protocol):
    """A client connection the benchmarks open: the `websockets` client's or bench.light_client's."""

    async def close(self) -> None: ...


async def close_clients(sockets: Sequence[Closable], readers: Sequence[asyncio.Task[Any]]) -> None:
    """Stop the readers and close the sockets, 200 at a time, each within 3 s."""
    for task in readers:
        task.cancel()
    gate = asyncio.Semaphore(200)

    async def close(ws: Closable) -> None:
        async with gate:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 3)

    await asyncio.gather(*(close(ws) for ws in sockets))
    for task in readers:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
