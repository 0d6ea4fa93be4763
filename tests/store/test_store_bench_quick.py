"""The store benchmark runs end to end in its CI-sized mode and reports every rate and ratio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
RATES = {
    "raw_lua_appends_per_s",
    "store_appends_per_s",
    "raw_xrange_events_per_s",
    "store_read_events_per_s",
    "read_decode_fold_events_per_s",
}
RATIOS = {"append_ours_over_raw", "read_ours_over_raw", "read_fold_over_raw"}


def test_the_quick_store_bench_reports_positive_rates_and_ratios(tmp_path: Path) -> None:
    out = tmp_path / "store_bench.json"
    subprocess.run(
        [sys.executable, "-m", "bench.store_bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        check=True,
        timeout=60,
        capture_output=True,
    )
    result = json.loads(out.read_text())
    assert result["quick"] is True
    assert set(result["rates"]) == RATES and set(result["ratios"]) == RATIOS
    assert all(value > 0 for value in [*result["rates"].values(), *result["ratios"].values()])
