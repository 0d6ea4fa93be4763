"""`python -m bench load --ack-levels --quick`: the table workload at each acknowledgement level on a real
primary with a replica, side by side, with each level's figures and its ratios to `primary` (no timing
assertions: the machines are shared and noisy; the figures are measured, not tested)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.load import ack_levels, ack_summary, redis_server_version
from tests.support.redis import has_redis_server

ROOT = Path(__file__).resolve().parents[2]
# A bound against a hang: two 2 s runs and their servers take well under a minute on an idle machine.
TIMEOUT = 240


def test_replica_fsync_is_measured_only_where_redis_has_waitaof() -> None:
    assert ack_levels((7, 0, 15)) == ["primary", "replica"]
    assert ack_levels((7, 2, 0)) == ["primary", "replica", "replica_fsync"]


def test_each_level_is_set_against_primary() -> None:
    def run(cmd_s: float, p99: float) -> dict[str, object]:
        return {
            "commands_per_s": cmd_s,
            "all_clients_ms": {"p50": 1.0, "p99": p99},
            "first_placements_ms": {"p50": 1.0},
            "later_placements_ms": {"p50": 1.0},
            "slowest_percent": {"in_first": 0.1, "in_last": 0.1},
            "cpu_us_per_command": 100.0,
            "system_cpu_us_per_command": 10.0,
            "generator": {"core_share": 0.3},
            "ack_ms": {"p99": p99},
            "rejected": {"unavailable": 1},
        }

    sets = [{"primary": run(1000, 2.0), "replica": run(800, 3.0)} for _ in range(3)]
    summary = ack_summary(sets)
    assert summary["ratios_to_primary"]["primary"] == {"throughput": 1.0, "p99": 1.0}
    assert summary["ratios_to_primary"]["replica"] == {"throughput": 0.8, "p99": 1.5}
    assert summary["levels"]["replica"]["unavailable"] == 3


@pytest.mark.integration
@pytest.mark.skipif(not has_redis_server(), reason="needs a redis-server binary")
def test_a_quick_run_measures_every_level_this_redis_gives(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env["BENCH_RESULTS_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "load", "--ack-levels", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")[-4000:]
    result = json.loads((tmp_path / "load_ack.json").read_text())
    levels = ack_levels(redis_server_version())
    assert result["quick"] is True
    assert list(result["summary"]["levels"]) == levels
    assert result["left_out"] == [level for level in ("replica_fsync",) if level not in levels]
    for level in levels:
        run = result["rounds"][0][level]
        assert run["accepted"] > 0 and run["errors"] == {} and run["incomplete"] == 0, run
        assert result["summary"]["levels"][level]["commands_per_s"] > 0
    assert result["summary"]["ratios_to_primary"]["primary"] == {"throughput": 1.0, "p99": 1.0}
    if "replica_fsync" not in levels:
        assert "no replica_fsync" in done.stderr.decode()
