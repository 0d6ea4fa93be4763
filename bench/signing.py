"""Signing: what an envelope's Ed25519 signature costs a running server on the table workload.

The minimal pipeline (`bench/minimal.py`) runs the table workload of `bench load` three ways: plain,
with `--pad` (envelopes as long as signed ones, none signed: the signature's bytes without its work) and
with `--sign` (every envelope signed as ours are, by the same Signer, in the same line format). The
three run in sets on one Redis, the order rotated from one set to the next (these machines drift:
whichever runs last would otherwise be favoured). Reported: the medians of the sets' own ratios to the
plain run (throughput, server CPU per command, p99) and of their differences in server CPU per command,
beside one signature's CPU measured alone (`bench.pipeline.signature_us`). Ours signs every envelope and
cannot run without: this tells how much of what separates ours from the plain minimal pipeline the
signature explains, and whether it is the signing or the longer lines.

    python -m bench signing [--sets 6] [--duration 10] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench.common import ratio, write_result
from bench.load import Mode, add_rotation_arguments, rotated_runs, rotation_config
from bench.pipeline import signature_us

MODES: dict[str, Mode] = {"plain": ({}, []), "padded": ({}, ["--pad"]), "signed": ({}, ["--sign"])}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rotation_arguments(parser, "sets", "sets of runs (plain, padded, signed; rotated)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    config = rotation_config(args, "sets")
    sets = rotated_runs("minimal", config, MODES, args.sets, "set")

    def against_plain(mode: str) -> dict[str, float]:
        def median_ratio(pick: Any) -> float:
            return statistics.median(ratio(pick(s[mode]), pick(s["plain"])) for s in sets)

        return {
            "throughput": median_ratio(lambda r: r["commands_per_s"]),
            "cpu_per_command": median_ratio(lambda r: r["cpu_us_per_command"]),
            "p99": median_ratio(lambda r: r["all_clients_ms"]["p99"]),
            "cpu_us_added_per_command": statistics.median(
                s[mode]["cpu_us_per_command"] - s["plain"]["cpu_us_per_command"] for s in sets
            ),
        }

    alone = signature_us()
    summary: dict[str, Any] = {
        "signed": against_plain("signed"),
        "padded": against_plain("padded"),
        "signature_alone_us": alone,
    }
    path = write_result("signing", {"quick": args.quick, "summary": summary, "sets": sets}, argv)
    signed, padded = summary["signed"], summary["padded"]
    print(
        f"signing: against the plain minimal pipeline, signed: throughput {signed['throughput']:.2f}x, CPU "
        f"per command {signed['cpu_per_command']:.2f}x ({signed['cpu_us_added_per_command']:+.0f} us), p99 "
        f"{signed['p99']:.2f}x; padded: {padded['throughput']:.2f}x, {padded['cpu_per_command']:.2f}x "
        f"({padded['cpu_us_added_per_command']:+.0f} us), {padded['p99']:.2f}x (medians of {len(sets)} "
        f"sets); one signature alone {alone:.1f} us; wrote {path}"
    )
    return 0
