"""Instructions: the table workload's cost counted in instructions, ours against the minimal pipeline.

Timings on a small shared machine swing with its neighbours; instruction counts do not. Each server (ours,
the minimal pipeline, and the minimal pipeline that signs every envelope as ours does) runs under
valgrind's callgrind, uninstrumented through its start and a warm-up game per table; `callgrind_control`
turns counting on for exactly `--games` games of the table workload (bench/load.py: `--tables` tables
at once, 3 players and 3 spectators each, players in turn awaiting their answers, the game's creation,
connections, hellos and closes included) and off again. The server's instructions per game follow, the
same from run to run within about 1%, with the ratios. `--placements 0` counts game starts alone;
`--simulate` also counts simulated cache misses and branch mispredictions.

Instructions are not time: the interpreter runs fewer instructions per cycle than a signature's
arithmetic, and a system call's kernel side is not counted. Read them beside `python -m bench load`.

`--before TREE` also counts ours as another checkout has it (a worktree of an earlier commit: `git
worktree add /tmp/before <commit>`), on the same Redis in the same run: what a change did to ours.

    python -m bench instructions [--games 24] [--placements 120] [--tables 6] [--simulate] [--before TREE]
    python -m bench instructions --quick
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT, Callgrind, RedisServer, ServerProcess, ratio, say, write_result
from bench.load import TableConfig, Tables, checkpoint_counts

# (label, server kind, its options)
SERVERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("ours", "ours", ()),
    ("minimal", "minimal", ()),
    ("minimal_signing", "minimal", ("--sign",)),
)
WARM_UP_PLACEMENTS = 3
# What callgrind counts with --cache-sim=yes --branch-sim=yes, in the order of its "Collected" line:
# instructions, data reads and writes, L1 misses (instructions, data read, data write), last-level misses
# (the same three), conditional branches and their mispredictions, indirect branches and theirs.
SIMULATED = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim")
# Valgrind runs a server tens of times slower: its start and its shutdown take that much longer.
START_TIMEOUT = 180.0
STOP_TIMEOUT = 180.0


async def _play(url: str, tables: int, games: int, placements: int) -> Tables:
    """`games` games of `placements` placements, spread over `tables` tables playing at once."""
    meter = Tables(TableConfig(url=url, tables=tables, placements=placements, duration=float("inf")))
    base = url.rstrip("/")
    ws_base = base.replace("http://", "ws://")
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:

        async def table(index: int) -> None:
            for _ in range(games // tables + (1 if index < games % tables else 0)):
                await meter.play_game(http, ws_base, index, float("inf"))

        await asyncio.gather(*(table(index) for index in range(tables)))
    return meter


def count(
    kind: str, options: tuple[str, ...], redis_url: str, args: argparse.Namespace, tree: Path = ROOT
) -> dict[str, Any]:
    """One server (of checkout `tree`) under callgrind: its instructions over the measured games."""
    callgrind = Callgrind.find()
    if callgrind is None:
        raise SystemExit("instructions: needs valgrind (apt-get install valgrind)")
    wrapper = callgrind.wrapper(simulate=args.simulate)
    server = ServerProcess(kind, redis_url, args=options, wrapper=wrapper, timeout=START_TIMEOUT, tree=tree)
    try:
        asyncio.run(_play(server.url, args.tables, args.tables, WARM_UP_PLACEMENTS))
        callgrind.counting(server.pid, True)
        started = time.perf_counter()
        meter = asyncio.run(_play(server.url, args.tables, args.games, args.placements))
        elapsed = time.perf_counter() - started
        callgrind.counting(server.pid, False)
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(STOP_TIMEOUT)
    finally:
        server.stop()
    counts = Callgrind.collected(server.logs())
    if meter.errors or meter.rejected or meter.pending or meter.accepted != args.games * args.placements:
        raise RuntimeError(
            f"the workload did not run clean: {meter.accepted} accepted, errors {meter.errors}, "
            f"rejected {meter.rejected}, {len(meter.pending)} incomplete"
        )
    total = counts[0]
    events = dict(zip(SIMULATED, counts, strict=True)) if args.simulate else {}
    return {
        "instructions": total,
        "simulated_per_game": {name: value / args.games for name, value in events.items()},
        "per_game": total / args.games,
        "per_command": total / meter.accepted if meter.accepted else None,
        "accepted": meter.accepted,
        "games": meter.games,
        "wall_seconds": elapsed,
        "checkpoints": checkpoint_counts(redis_url, meter.game_ids) if kind == "ours" else None,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="CI size: 2 games of 3 placements, ours and minimal only"
    )
    parser.add_argument("--games", type=int, default=24, help="games counted per server")
    parser.add_argument("--placements", type=int, default=120, help="placements a game (0: game starts only)")
    parser.add_argument("--tables", type=int, default=6, help="tables playing at once")
    parser.add_argument(
        "--simulate", action="store_true", help="also simulate the caches and branch prediction (slower)"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="TREE",
        help="also count ours as this checkout has it (a worktree of an earlier commit), as ours_before",
    )


def main(args: argparse.Namespace, argv: list[str]) -> int:
    servers = SERVERS
    if args.quick:
        args.games, args.placements, args.tables = 2, 3, 2
        servers = SERVERS[:2]
    if args.games < args.tables:
        raise SystemExit("instructions: --games must be at least --tables")
    if args.before is not None:
        if not (args.before / "server" / "ops" / "cli.py").is_file():
            raise SystemExit(f"instructions: {args.before} is not a checkout of this project")
        servers = (*servers, ("ours_before", "ours", ()))
    runs: dict[str, dict[str, Any]] = {}
    with RedisServer() as redis:
        for label, kind, options in servers:
            tree = args.before if label == "ours_before" else ROOT
            runs[label] = count(kind, options, redis.url, args, tree)
            signed = runs[label]["checkpoints"]
            per = ""
            if signed and signed["checkpoints"]:
                per = f", {signed['envelopes_per_checkpoint']:.1f} envelopes a checkpoint"
            elif signed:
                per = ", every envelope signed alone"
            say(f"instructions: {label} {runs[label]['per_game'] / 1e6:.2f} M a game{per}")
    ours = runs["ours"]["per_game"]
    summary: dict[str, Any] = {"ours_to_minimal": ratio(ours, runs["minimal"]["per_game"])}
    if "ours_before" in runs:
        before = runs["ours_before"]
        summary["ours_to_before"] = ratio(ours, before["per_game"])
        summary["before_to_minimal"] = ratio(before["per_game"], runs["minimal"]["per_game"])
        summary["before_tree"] = str(args.before)
    if "minimal_signing" in runs:
        signed = runs["minimal_signing"]["per_game"]
        summary["ours_to_minimal_signing"] = ratio(ours, signed)
        if args.placements:
            # What signing adds to each command of the minimal pipeline: a signature and a longer line.
            summary["signing_per_command"] = (signed - runs["minimal"]["per_game"]) / args.placements
    if args.simulate:
        # Ours against the pipeline that does most nearly what ours does: the signing one when it ran.
        baseline = "minimal_signing" if "minimal_signing" in runs else "minimal"
        against = runs[baseline]["simulated_per_game"]
        summary[f"simulated_ours_to_{baseline}"] = {
            name: ratio(value, against[name]) for name, value in runs["ours"]["simulated_per_game"].items()
        }
    config = {
        "games": args.games,
        "placements": args.placements,
        "tables": args.tables,
        "before": str(args.before),
    }
    # The documented shape writes instructions.json; another keeps a name of its own.
    name = "instructions" if args.placements == 120 or args.quick else f"instructions_p{args.placements}"
    path = write_result(
        name,
        {"quick": args.quick, "config": config, "summary": summary, "runs": runs},
        argv,
    )
    line = ", ".join(f"{label} {run['per_game'] / 1e6:.2f} M" for label, run in runs.items())
    to_before = f", ours/before {summary['ours_to_before']:.2f}x" if "ours_to_before" in summary else ""
    ratios = f"ours/minimal {summary['ours_to_minimal']:.2f}x{to_before}"
    print(f"instructions per game ({line}): {ratios}; wrote {path}")
    return 0
