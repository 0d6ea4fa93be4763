"""`python -m bench load --quick` leaves a complete result, and `python -m bench plot` draws it.

No timing assertions: the machines are shared and noisy; the figures are measured, not tested.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench import load, plot
from tests.support.redis import has_redis_server

ROOT = Path(__file__).resolve().parents[2]


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _run(**overrides: Any) -> dict[str, Any]:
    """A run of the table workload as bench/load.py writes it, with made-up figures."""
    run: dict[str, Any] = {
        "commands_per_s": 1000.0,
        "all_clients_ms": {"p50": 1.0, "p99": 3.0},
        "first_placements_ms": {"p50": 1.5},
        "later_placements_ms": {"p50": 1.0},
        "slowest_percent": {"in_first": 0.2, "in_last": 0.1},
        "cpu_us_per_command": 150.0,
        "system_cpu_us_per_command": 40.0,
        "generator": {"core_share": 0.3},
    }
    run.update(overrides)
    return run


LOAD = {
    "command": "python -m bench load",
    "config": {"tables": 12, "duration": 20.0},
    "rounds": [
        {"round": i, "ours": _run(), "minimal": _run(commands_per_s=1100.0), "ours_interference": _run()}
        for i in (1, 2)
    ],
    "summary": {
        "ours": {"commands_per_s": 1000.0, "p99_ms": 3.0},
        "minimal": {"commands_per_s": 1100.0, "p99_ms": 3.0},
        "ratios": {"throughput": 0.91, "p99": 1.0, "cpu_per_command": 1.0},
        "goals": {
            "throughput_min": 1.0,
            "p99_max": 1.1,
            "cpu_per_command_max": 1.0,
            "interference_p99_max": 1.2,
        },
        "interference": {"p99_without_ms": 3.0, "p99_with_ms": 3.3, "p99_ratio": 1.1},
    },
}
SCALING = {
    "command": "python -m bench scaling --quick",
    "games": [
        {
            "games": n,
            "ours": {"commands_per_s": 900.0 * n**0.5},
            "minimal": {"commands_per_s": 1000.0 * n**0.5},
        }
        for n in (1, 10, 100)
    ],
}


def _plot(results: Path, out: Path) -> None:
    parser = __import__("argparse").ArgumentParser()
    plot.add_arguments(parser)
    args = parser.parse_args(["--quick", "--results", str(results), "--out", str(out)])
    assert plot.main(args, []) == 0


def test_plot_draws_both_figures_from_the_results(tmp_path: Path) -> None:
    (tmp_path / "load.json").write_text(json.dumps(LOAD))
    (tmp_path / "scaling.json").write_text(json.dumps(SCALING))
    out = tmp_path / "docs"
    _plot(tmp_path, out)
    for name in ("load.png", "scaling.png"):
        assert (out / name).read_bytes().startswith(b"\x89PNG"), name


def test_plot_skips_a_missing_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "scaling.json").write_text(json.dumps(SCALING))
    _plot(tmp_path, tmp_path)
    assert (tmp_path / "scaling.png").exists() and not (tmp_path / "load.png").exists()
    assert "load.json" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.skipif(not has_redis_server(), reason="needs a redis-server binary")
def test_load_quick_reports_both_servers_every_round_and_the_interference(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env["BENCH_RESULTS_DIR"] = str(tmp_path)
    command = [sys.executable, "-m", "bench", "load", "--quick", "--interference-control"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    result = json.loads((tmp_path / "load.json").read_text())
    assert result["benchmark"] == "load" and result["quick"] is True
    assert len(result["rounds"]) == result["config"]["rounds"] >= 1
    for row in result["rounds"]:
        for label in ("ours", "minimal", "ours_interference", "ours_control"):
            run = row[label]
            assert run["server_kind"] == ("minimal" if label == "minimal" else "ours")
            assert _positive(run["commands_per_s"]), label
            assert _positive(run["all_clients_ms"]["p99"]), label
            # Every completed command counts in one of the two parts, by its place in its game.
            parts = run["first_placements_ms"]["count"] + run["later_placements_ms"]["count"]
            assert parts == run["all_clients_ms"]["count"] > 0, label
            assert _positive(run["first_placements_ms"]["p50"]), label
            slow = run["slowest_percent"]
            assert 0 <= slow["in_first"] <= 1 and 0 <= slow["in_last"] <= 1, label
            assert slow["span_share"] == min(1.0, load.EARLY_PLACEMENTS / result["config"]["placements"])
            assert _positive(run["cpu_us_per_command"]), label
            # The kernel's part (the sockets) is part of the whole, and never all of it.
            assert 0 < run["system_cpu_us_per_command"] < run["cpu_us_per_command"], label
            assert _positive(run["generator"]["cpu_seconds"]), label
            assert run["games_started"] >= result["config"]["tables"]
            assert run["errors"] == {}, label
        for label, at in (("ours_interference", "this server"), ("ours_control", "another server")):
            interference = row[label]["interference"]
            assert interference["at"] == at
            assert sum(interference["late_spectator"]["reads"].values()) > 0, label
            assert interference["cold_games"]["loaded"] > 0, label
        assert "interference" not in row["ours"]
        for label in ("ours", "ours_interference", "ours_control"):
            # Read back from the run's streams: every envelope ours wrote is in a signed batch.
            signed = row[label]["checkpoints"]
            assert signed["envelopes"] >= row[label]["accepted"] > 0, label
            assert signed["signed_alone"] == 0, label
            assert 1 <= signed["checkpoints"] <= signed["envelopes"], label
            assert 1 <= signed["envelopes_per_checkpoint"] <= signed["largest_checkpoint"], label
        assert "checkpoints" not in row["minimal"]
    summary = result["summary"]
    for key in ("throughput", "p99", "cpu_per_command"):
        assert _positive(summary["ratios"][key]), key
    assert _positive(summary["interference"]["p99_ratio"])
    assert _positive(summary["interference"]["p99_control_ratio"])
    assert set(summary["goals_met"]) == {"throughput", "p99", "cpu_per_command", "interference"}
    signed = summary["checkpoints"]
    assert signed["envelopes"] == sum(row["ours"]["checkpoints"]["envelopes"] for row in result["rounds"])
    assert signed["envelopes_per_checkpoint"] == pytest.approx(signed["envelopes"] / signed["checkpoints"])


def _load_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    load.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_slowest_percent_counts_where_the_slowest_hundredth_falls_in_its_game() -> None:
    # 1,200 commands of 120-placement games, ten games' worth; the 12 slowest (1%) are placed by hand:
    # 6 at a game's placement 0-9, 3 at 110-119, 3 in between.
    placed = [(0.001, index % 120) for index in range(1188)]
    placed += [(0.5, 2)] * 6 + [(0.5, 115)] * 3 + [(0.5, 60)] * 3
    share = load.slowest_percent(placed, 120)
    assert share == {"in_first": 0.5, "in_last": 0.25, "span_share": 10 / 120}
    # A game shorter than two spans: its last span starts where its first ends, so none is counted twice.
    short = load.slowest_percent([(0.2, 3), (0.1, 12), (0.3, 14)] + [(0.0, 0)] * 97, 15)
    assert short == {"in_first": 0.0, "in_last": 1.0, "span_share": 10 / 15}
    assert load.slowest_percent([], 120)["in_first"] == 0.0


def test_only_the_documented_workload_writes_the_result_the_plot_draws() -> None:
    assert load.result_name(_load_args()) == "load"
    assert load.result_name(_load_args("--quick")) == "load"
    assert load.result_name(_load_args("--placements", "3")) == "load_placements3"
    assert (
        load.result_name(_load_args("--no-interference", "--rounds", "2", "--duration", "10"))
        == "load_duration10_rounds2_interferenceFalse"
    )
    assert load.result_name(_load_args("--duration", "2.5")) == "load_duration2.5"
    assert load.result_name(_load_args("--signing-baseline")) == "load_signing_baselineTrue"
    assert load.result_name(_load_args("--stagger", "0.04")) == "load_stagger0.04"
    assert load.result_name(_load_args("--interference-control")) == "load_interference_controlTrue"
    assert load.result_name(_load_args("--before", "/tmp/x")) == "load_before"


def test_before_must_be_a_checkout_of_the_project(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not a checkout"):
        load.main(_load_args("--before", str(tmp_path)), [])


def test_the_control_is_the_median_p99_of_the_runs_with_the_interference_aimed_elsewhere() -> None:
    rounds = [
        {
            "ours": _run(all_clients_ms={"p50": 1.0, "p99": 4.0}),
            "minimal": _run(),
            "ours_interference": _run(all_clients_ms={"p50": 1.0, "p99": with_p99}),
            "ours_control": _run(all_clients_ms={"p50": 1.0, "p99": control_p99}),
        }
        for with_p99, control_p99 in ((5.0, 4.4), (6.0, 5.0), (9.0, 4.8))
    ]
    for row in rounds:
        row["ours_interference"]["interference"] = {
            "late_spectator": {"reads": {"websocket": 1, "http": 1}},
            "cold_games": {"loaded": 3},
        }
    interference = load.summarise(rounds)["interference"]
    assert interference["p99_ratio"] == 6.0 / 4.0
    assert interference["p99_control_ms"] == 4.8
    assert interference["p99_control_ratio"] == 4.8 / 4.0
    without_control = [{k: v for k, v in row.items() if k != "ours_control"} for row in rounds]
    assert "p99_control_ratio" not in load.summarise(without_control)["interference"]


def test_the_control_needs_the_interference() -> None:
    with pytest.raises(SystemExit, match="needs one"):
        load.main(_load_args("--no-interference", "--interference-control"), [])


class _FirstGames(load.Tables):
    """The table workload with games that only note when each table's first one starts, then last
    until the deadline (no server needed)."""

    def __init__(self, config: load.TableConfig) -> None:
        super().__init__(config)
        self.first: dict[int, float] = {}

    async def play_game(self, http: Any, ws_base: str, table: int, deadline: float) -> None:
        self.first.setdefault(table, time.perf_counter())
        await asyncio.sleep(max(0.0, deadline - time.perf_counter()))


@pytest.mark.parametrize("stagger", [0.0, 0.1])
async def test_tables_start_their_first_games_stagger_seconds_apart(stagger: float) -> None:
    config = load.TableConfig(url="http://127.0.0.1:9", tables=4, duration=0.6, stagger=stagger)
    tables = _FirstGames(config)
    await tables.run()
    starts = [tables.first[table] - tables.first[0] for table in range(4)]
    # Each table waits its own offset, not the sum of the earlier ones': it starts before the next
    # table's time (a loaded machine may wake it late, never early).
    slack = max(stagger, 0.05)
    for table, offset in enumerate(starts):
        assert table * stagger <= offset < table * stagger + slack, starts


async def test_late_reads_back_to_back_stop_at_the_end() -> None:
    """`--late-every 0` reads back to back and still ends: against no server, every read fails at once
    (counted, then a tenth of a second's pause) until the end comes."""
    started = time.time()
    done = await asyncio.wait_for(load._late_reads("http://127.0.0.1:9", "g", 10, started + 0.5, 0.0), 10)
    assert done["errors"] >= 1 and done["reads"] == {"websocket": 0, "http": 0}
