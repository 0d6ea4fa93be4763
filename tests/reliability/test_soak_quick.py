"""The soak at CI size (`python -m bench.soak --seconds 12`): bots, spectators (the default view deltas,
deltas asked for by name, whole views) and reconnect storms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_serves_every_game_without_error_through_reconnect_storms(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    command = [sys.executable, "-m", "bench.soak", "--seconds", "12", "--interval", "4", "--games", "4"]
    command += ["--spectators", "3", "--placements", "10", "--storm-every", "3", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["errors"] == {} and report["log_problems"] == [] and report["server_alive"]
    assert report["games_finished"] >= 4 and report["commands_accepted"] > 100
    assert report["storms"] >= 2 and report["connections_dropped"] > 0 and report["reconnects"] > 0
    assert len(report["intervals"]) >= 3
    assert all(row["server_rss_mib"] for row in report["intervals"][:3])
