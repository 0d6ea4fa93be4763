"""How fast one client may create games: a token bucket per client address, on this node (the first gate:
server.web.http also spends a token of the bucket every node shares, in the store).

An IPv6 client is its /56, as for connections (server.connections.address_key): one customer commonly
holds a /56, so counting /64s would give it 256 limits' worth of games. The buckets of the addresses seen
least recently are forgotten past `max_addresses`, so that a flood of addresses cannot grow this without
bound.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from server.connections import address_key
from server.protocol.limits import TokenBucket


def client_key(host: str) -> str:
    """The key of a client address: the address itself, or its /56 for IPv6."""
    return address_key((host,))


class AddressThrottle:
    """`per_minute` events a minute per client address on average, `burst` at once (no limit when
    `per_minute` is 0)."""

    def __init__(
        self,
        per_minute: float,
        burst: int,
        *,
        max_addresses: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = per_minute / 60.0
        self.burst = max(1, burst)
        self.max_addresses = max_addresses
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, host: str | None) -> int:
        """Spend one of the address's tokens: 0 when it had one, else the whole seconds to wait."""
        if self.rate <= 0:
            return 0
        key = client_key(host or "unknown")
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.rate, self.burst, self._clock)
            if len(self._buckets) > self.max_addresses:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        if bucket.take():
            return 0
        return max(1, math.ceil(bucket.wait()))
