"""scripts/frame_sizes.py, which measures the frame sizes docs/protocol.md quotes, runs and reports them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "frame_sizes.py"


def test_a_short_game_reports_each_view_mode_with_whole_views_the_largest() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--players", "2", "--placements", "40", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["players"], report["placements"]) == (2, 40)
    none, delta, full = report["none"], report["delta"], report["full"]
    for key in ("placement_median", "placement_max", "placement_last", "end"):
        # Each mode's frame carries the same envelopes; a delta adds what changed, a view the whole board.
        assert 0 < none[key] < delta[key] < full[key], key
