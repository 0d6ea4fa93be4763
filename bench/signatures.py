"""Signatures: what one signature per turn of the event loop buys ours on the table workload.

Every envelope is signed (Ed25519). With `ORCHESTRA_BATCH_SIGNATURES=true` (the default) the envelopes
that every game writes in one turn of the loop share one signature over a Merkle root
(`server/engine/turn_signer.py`); with `false` each is signed alone. The two run in alternating pairs on
one Redis (bench/pairs.py); reported: the medians of the pairs' own ratios (batched/alone) of throughput,
server CPU per command and p99 send -> every client of the table.

    python -m bench signatures [--pairs 6] [--duration 10] [--quick]
"""

from __future__ import annotations

import argparse

from bench import pairs

MODES = {"batched": {"ORCHESTRA_BATCH_SIGNATURES": "true"}, "alone": {"ORCHESTRA_BATCH_SIGNATURES": "false"}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pairs.add_arguments(parser)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    pairs.run_pairs("signatures", MODES, args, argv)
    return 0
