"""The time written into envelopes: UTC to the millisecond, ISO 8601 with Z."""

from __future__ import annotations

import time

# (second, its date and time of day formatted), replaced as one value.
_last: tuple[int, str] = (-1, "")


def utc_text(ms: int) -> str:
    """`ms` milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`."""
    global _last
    second, millis = divmod(ms, 1000)
    last_second, prefix = _last
    # Every command stamps its envelopes: the date and time of day change once a second, so they are
    # formatted once a second and only the milliseconds each time.
    if second != last_second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _last = (second, prefix)
    return f"{prefix}.{millis:03d}Z"


def utc_now() -> str:
    """The envelope time now."""
    return utc_text(time.time_ns() // 1_000_000)
