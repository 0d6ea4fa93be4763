"""Profile: py-spy samples a server while a load runs, then ranks functions by self time (the frame on
top of the stack) and by inclusive time (anywhere on the stack), both as a share of all samples taken
while the server was busy. The load: the throughput benchmark's (closed loop, 20 games x 3 players x 5
spectators), or open loop at `--open-rate` commands/s; the server: ours, or `--server minimal`, so that
both can be profiled at the same offered load.

    python -m bench profile [--duration 15] [--rate 100] [--server minimal] [--open-rate 1150]
                            [--view whole|delta|none]

Writes bench/results/profile*.json (the top entries) and profile*.txt (py-spy's raw folded stacks:
`flamegraph.pl profile.txt > profile.svg`, or speedscope, draws them). py-spy samples with
--nonblocking (it never pauses the server), so the load runs at nearly full speed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import RESULTS, RedisServer, ServerProcess, raise_nofile, say, write_result
from bench.generator import VIEWS, LoadConfig, brief, run

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("bench profile: py-spy is not installed (pip install py-spy, or the bench extra)")
    return found


def _short(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    path = match.group("file")
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match.group('function')} ({path})"


def rank(folded: str, top: int) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's raw (folded) output."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    modules: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [
            _short(f) for f in stack.split(";") if "(" in f and not f.startswith(("process ", "thread "))
        ]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
        leaf = frames[-1]
        area = leaf[leaf.rfind("(") + 1 : -1].split("/")[0]
        modules[area] += count

    def share(counter: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": name, "samples": n, "percent": round(100 * n / total, 2)}
            for name, n in counter.most_common(top)
        ]

    return {
        "samples": total,
        "self": share(own),
        "inclusive": share(inclusive),
        "self_by_package": share(modules),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: 3 seconds")
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--no-compression",
        action="store_true",
        help="clients do not offer permessage-deflate (writes profile_no_compression.*)",
    )
    parser.add_argument(
        "--server", choices=["ours", "minimal"], default="ours", help="profile this server (minimal.* files)"
    )
    parser.add_argument(
        "--view",
        choices=list(VIEWS),
        default="whole",
        help="what the clients' hello asks for in live frames (other than whole: writes *_<view>.*)",
    )
    parser.add_argument(
        "--open-rate",
        type=float,
        default=0.0,
        help="open loop at this many commands/s instead of closed loop (writes *_open.*)",
    )


def main(args: argparse.Namespace, argv: list[str]) -> int:
    raise_nofile()
    duration = 3.0 if args.quick else args.duration
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "profile_no_compression" if args.no_compression else "profile"
    if args.server == "minimal":
        name = name.replace("profile", "profile_minimal", 1)
    if args.open_rate > 0:
        name += "_open"
    if args.view != "whole":
        name += f"_{args.view}"
    raw_path = RESULTS / f"{name}.txt"
    config = LoadConfig(
        games=20,
        players=3,
        spectators=5,
        mode="open" if args.open_rate > 0 else "closed",
        rate=args.open_rate if args.open_rate > 0 else 500.0,
        arrival="poisson",
        duration=duration,
        compression=not args.no_compression,
        view=VIEWS[args.view],
    )
    with RedisServer() as redis, ServerProcess(args.server, redis.url) as server:
        config.url, config.server_pid, config.redis_pid = server.url, server.pid, redis.pid
        command = [py_spy(), "record", "--pid", str(server.pid), "--output", str(raw_path), "--format", "raw"]
        command += ["--rate", str(args.rate), "--nonblocking", "--duration", str(int(duration + 8))]
        spy = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        time.sleep(1.0)
        result = run(config)
        result["server_kind"] = args.server
        say("under py-spy: " + brief(result))
        _, err = spy.communicate(timeout=duration + 60)
        if spy.returncode != 0:
            raise SystemExit(f"py-spy failed: {err.decode(errors='replace')[-2000:]}")
    ranked = rank(raw_path.read_text(), args.top)
    path = write_result(
        name,
        {"quick": args.quick, "summary": {"samples": ranked["samples"]}, "load": result, "profile": ranked},
        argv,
    )
    for row in ranked["self"][:15]:
        print(f"{row['percent']:6.2f}%  {row['function']}")
    print(f"wrote {path} and {raw_path}")
    return 0
