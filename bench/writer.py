"""Writer: what the direct write of shared frames buys ours on the table workload (`bench load`).

The direct write (`server/compat/uvicorn.py`) uses uvicorn's private websocket protocol, kept only while
it buys more than 10% (`python -m bench fanout --writer` weighs it on fan-out). This runs ours on the
table workload with it (`ORCHESTRA_WS_SHARED_FRAMES=true`, the default) and without it (every frame
through ASGI), in pairs of runs on one Redis, the order swapped from one pair to the next (these machines
drift: whichever runs second would otherwise be favoured), and reports the medians of the pairs' own
ratios: throughput, server CPU per command and p99 send -> every client of the table.

    python -m bench writer [--pairs 6] [--duration 10] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench.common import ratio, write_result
from bench.load import Mode, add_rotation_arguments, rotated_runs, rotation_config

MODES: dict[str, Mode] = {
    "direct": ({"ORCHESTRA_WS_SHARED_FRAMES": "true"}, []),
    "asgi": ({"ORCHESTRA_WS_SHARED_FRAMES": "false"}, []),
}
GOAL = 0.10  # what the private path must buy to stay


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rotation_arguments(parser, "pairs", "pairs of runs (direct and ASGI, in turn first)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    config = rotation_config(args, "pairs")
    pairs = rotated_runs("ours", config, MODES, args.pairs, "pair")

    def median_ratio(pick: Any) -> float:
        return statistics.median(ratio(pick(p["direct"]), pick(p["asgi"])) for p in pairs)

    summary = {
        "throughput": median_ratio(lambda r: r["commands_per_s"]),
        "cpu_per_command": median_ratio(lambda r: r["cpu_us_per_command"]),
        "p99": median_ratio(lambda r: r["all_clients_ms"]["p99"]),
    }
    summary["buys_more_than_10_percent"] = (
        summary["throughput"] >= 1 + GOAL or summary["cpu_per_command"] <= 1 - GOAL
    )
    path = write_result("writer", {"quick": args.quick, "summary": summary, "pairs": pairs}, argv)
    print(
        f"writer: direct/ASGI throughput {summary['throughput']:.2f}x, CPU per command "
        f"{summary['cpu_per_command']:.2f}x, p99 {summary['p99']:.2f}x (medians of {len(pairs)} pairs); "
        f"wrote {path}"
    )
    return 0
