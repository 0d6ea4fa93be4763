"""The projector's lease in Redis: one projector writes a records database at a time; others wait.

The lease is a key holding its holder's random token with an expiry; the holder renews it well before it
expires and stops writing when a renewal finds the key another's, so two projectors never write at once
for longer than the holder takes to notice (a pass, at most). A key found gone (expired, or lost in a
failover to a replica that had not received it) is taken again if no one else has taken it.
"""

from __future__ import annotations

import secrets
from typing import Any

KEY = "orchestra:records:lease"
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class Lease:
    """A lease on `key` held for `ttl` seconds at a time through the redis-py asyncio `client`."""

    def __init__(self, client: Any, ttl: float = 10.0, key: str = KEY) -> None:
        """Not held until `take` succeeds."""
        self._client, self._key, self._ms = client, key, int(ttl * 1000)
        self._token = secrets.token_hex(16)

    async def take(self) -> bool:
        """Take the lease if it is free (or already ours); whether it is ours now."""
        if await self._client.set(self._key, self._token, nx=True, px=self._ms):
            return True
        return await self.renew()

    async def renew(self) -> bool:
        """Extend the lease if it is still ours; whether it is."""
        return bool(await self._client.eval(_RENEW, 1, self._key, self._token, self._ms))

    async def release(self) -> None:
        """Give the lease up if it is ours."""
        await self._client.eval(_RELEASE, 1, self._key, self._token)
