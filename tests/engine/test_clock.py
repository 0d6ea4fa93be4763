"""Envelope times: the cached formatting gives what datetime gives, to the millisecond."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from server.clock import utc_now, utc_text

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def oracle(ms: int) -> str:
    return (EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# From 1970 to 2200: dates with every number of digits a day and month can have.
moments = st.integers(min_value=0, max_value=7_258_118_400_000)


@given(st.lists(moments, min_size=1, max_size=20))
def test_any_sequence_of_moments_formats_as_datetime_does(moments: list[int]) -> None:
    for ms in moments:
        assert utc_text(ms) == oracle(ms)


@given(moments, st.integers(min_value=0, max_value=2_500))
def test_moments_within_and_across_a_second(start: int, step: int) -> None:
    for ms in (start, start + step, start + 2 * step, start):
        assert utc_text(ms) == oracle(ms)


def test_now_is_now() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    stamp = utc_now()
    after = datetime.now(UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    assert before <= datetime.fromisoformat(stamp) <= after
