"""The store benchmark's summary of several runs (the runs themselves are measured, not tested)."""

from __future__ import annotations

from bench.peer import _median


def test_the_median_skips_floors_a_run_could_not_measure() -> None:
    assert _median([0.7, None, 0.9, 0.8]) == 0.8
    assert _median([1.0, 0.5]) == 0.75
    assert _median([None, None]) is None
