"""`python -m bench faults --quick`: a real run on a Redis Cluster (a master killed while its replica lags,
then a server node killed) whose every client history the checker finds sound at `primary`, the writes
that failover lost counted, with faults and commands recorded (no vacuous pass)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.redis import has_redis_server

ROOT = Path(__file__).resolve().parents[2]
# A bound against a hang: the run itself takes well under a minute on an idle machine.
TIMEOUT = 240


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not has_redis_server(), reason="needs a redis-server binary"),
]


def test_an_unknown_fault_or_level_is_refused_in_words_before_anything_starts() -> None:
    for args, said in (
        (["faults", "--quick", "--faults", "kill_master,partition"], "unknown fault(s) partition"),
        (["faults", "--ack", "all"], "invalid choice: 'all'"),
        # Partitions put the nodes in network namespaces that the Cluster setup does not reach.
        (["faults", "--faults", "partition_node"], "partition_node needs --setup sentinel"),
        (["faults", "--replicas", "2"], "only with --setup sentinel"),
        (["faults", "--setup", "sentinel", "--replicas", "0"], "--replicas: 1 or more"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, timeout=60, check=False
        )
        assert done.returncode != 0
        assert said in done.stderr.decode(), done.stderr


def test_a_quick_fault_run_keeps_every_acknowledged_command_and_every_history_a_prefix(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env["BENCH_RESULTS_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "faults", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    output = (done.stdout + done.stderr).decode(errors="replace")[-4000:]
    result = json.loads((tmp_path / "faults.json").read_text())
    verdict = result["verdict"]
    assert done.returncode == 0, output
    assert result["quick"] is True and result["problems"] == []
    assert verdict["ok"] is True and set(verdict["anomalies"]) <= {"lost_acknowledged"}, verdict
    # The run did what it says: both faults happened, and commands were sent, accepted and followed.
    names = [fault["name"] for fault in result["faults"]]
    assert names == ["lag_kill#0", "kill_node#1"]
    assert result["faults"][0]["failed_over"] is True
    assert set(verdict["outage_seconds_by_fault"]) == set(names)
    lost = sum(verdict["lost_by_level"].values())
    # Each game's creation and every command accepted and kept.
    assert verdict["accepted"] >= 20 and result["envelopes_stored"] > verdict["accepted"] - lost
    assert result["envelopes_received"] >= 3 * verdict["accepted"]  # two players and a spectator each
    assert result["commands_sent"] >= verdict["accepted"]
    # The lagging master's death lost what `primary` acknowledged: named, counted, and tolerated at that
    # level; its clients were told with 4001 (else their histories would be no prefix, an anomaly).
    assert verdict["lost_by_level"].get("primary", 0) >= 1, verdict
    assert verdict["lost_by_fault"].get("lag_kill#0", 0) >= 1, verdict
    assert result["closes"].get("4001", 0) >= 1, result["closes"]
