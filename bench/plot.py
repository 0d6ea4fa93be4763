"""Plots of the raw results into docs/: the table workload against the baseline, and scaling.

    python -m bench plot [--results bench/results] [--out docs] [--quick]

docs/load.png: from `python -m bench load`, throughput and p99 (send -> every client of the table) of
ours, ours under interference and the minimal pipeline, per round, with the goals as lines.
docs/scaling.png: from `python -m bench scaling`, commands/s over the number of games, ours and minimal.
A missing result is reported and its plot skipped. `--quick` draws at a low resolution (for the tests).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, say

SERIES = (("ours", "ours", "tab:blue"), ("ours_interference", "ours, interference", "tab:cyan"))
BASELINE = ("minimal", "minimal", "tab:gray")


def _load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        say(f"plot: no {path} (run its benchmark first); skipped")
        return None
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _figure(run: dict[str, Any], name: str) -> float:
    return float(run["commands_per_s"] if name == "throughput" else run["all_clients_ms"]["p99"])


def plot_load(result: dict[str, Any], out: Path, dpi: int) -> Path:
    """Throughput and p99 per round, ours (and under interference) next to the minimal pipeline."""
    import matplotlib.pyplot as plt

    rounds = result["rounds"]
    summary = result["summary"]
    goals = summary["goals"]
    labels = [str(r["round"]) for r in rounds]
    present = [s for s in (SERIES[0], BASELINE, SERIES[1]) if all(s[0] in r for r in rounds)]
    width = 0.8 / len(present)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 5), constrained_layout=True)
    metrics = (
        (left, "accepted commands/s", "throughput", goals["throughput_min"]),
        (right, "p99 ms, send -> every client", "p99", goals["p99_max"]),
    )
    for axis, ylabel, name, goal in metrics:
        for offset, (key, label, colour) in enumerate(present):
            xs = [i + (offset - (len(present) - 1) / 2) * width for i in range(len(rounds))]
            axis.bar(xs, [_figure(r[key], name) for r in rounds], width, label=label, color=colour)
        baseline = summary["minimal"]["commands_per_s" if name == "throughput" else "p99_ms"]
        axis.axhline(
            baseline * goal, color="tab:red", linestyle="--", label=f"goal: {goal:g}x minimal's median"
        )
        if name == "p99" and "interference" in summary:
            limit = summary["interference"]["p99_without_ms"] * goals["interference_p99_max"]
            axis.axhline(limit, color="tab:orange", linestyle=":", label="goal under interference")
        axis.set_xticks(range(len(rounds)), labels)
        axis.set_xlabel("round")
        axis.set_ylabel(ylabel)
        axis.set_title(f"{name}: ours/minimal {summary['ratios'][name]:.2f}x (medians)")
        # Below the axes: inside, the legend hides the bars of a round.
        axis.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.15), ncols=2)
    config = result["config"]
    figure.suptitle(
        f"{config['tables']} tables x (3 players + 3 spectators), {config['duration']:g} s a run  "
        f"({result['command']})",
        fontsize="medium",
    )
    path = out / "load.png"
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def plot_scaling(result: dict[str, Any], out: Path, dpi: int) -> Path:
    """Commands/s over the number of concurrent games, ours and minimal."""
    import matplotlib.pyplot as plt

    rows = result["games"]
    games = [row["games"] for row in rows]
    figure, axis = plt.subplots(figsize=(6, 4), constrained_layout=True)
    for key, colour in (("ours", "tab:blue"), ("minimal", "tab:gray")):
        axis.plot(games, [row[key]["commands_per_s"] for row in rows], marker="o", label=key, color=colour)
    axis.set_xscale("log")
    axis.set_xticks(games, [f"{g:,}" for g in games])
    axis.set_ylim(bottom=0)
    axis.set_xlabel("concurrent games")
    axis.set_ylabel("accepted commands/s")
    axis.set_title(f"scaling ({result['command']})", fontsize="medium")
    axis.legend()
    path = out / "scaling.png"
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="low resolution")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the raw results are")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    args.out.mkdir(parents=True, exist_ok=True)
    dpi = 50 if args.quick else 110
    for name, draw in (("load", plot_load), ("scaling", plot_scaling)):
        result = _load(args.results / f"{name}.json")
        if result is not None:
            print(f"plot: wrote {draw(result, args.out, dpi)}")
    return 0
