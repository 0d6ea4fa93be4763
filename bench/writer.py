"""Writer: what the direct write of shared frames buys ours on the table workload (`bench load`).

The direct write (`server/compat/uvicorn.py`) is the server's one use of a dependency's private parts,
kept only while it buys more than 10%. This runs ours on the table workload with it
(`ORCHESTRA_WS_SHARED_FRAMES=true`, the default) and without it (every frame through ASGI), in
alternating pairs of runs on one Redis (bench/pairs.py), and reports the medians of the pairs' own ratios:
throughput, server CPU per command and p99 send -> every client of the table.

    python -m bench writer [--pairs 6] [--duration 10] [--quick]
"""

from __future__ import annotations

import argparse

from bench import pairs

MODES = {"direct": {"ORCHESTRA_WS_SHARED_FRAMES": "true"}, "asgi": {"ORCHESTRA_WS_SHARED_FRAMES": "false"}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pairs.add_arguments(parser)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    pairs.run_pairs("writer", MODES, args, argv)
    return 0
