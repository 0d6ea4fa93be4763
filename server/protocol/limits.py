"""Per-connection rate limiting: a token bucket (protocol.md: 50 commands a second, bursts of 100)."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """Allows `rate` events a second on average and up to `burst` at once."""

    __slots__ = ("rate", "burst", "_tokens", "_stamp", "_clock")

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self._clock = rate, float(burst), clock
        self._tokens = float(burst)
        self._stamp = clock()

    def take(self) -> bool:
        """Spend one token if there is one."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait(self) -> float:
        """Seconds until a token will be there (0 when one is), spending nothing."""
        tokens = min(self.burst, self._tokens + (self._clock() - self._stamp) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
