"""Connection limits of one node: TCP connections open at once (all, and per client address), how large
and how slow a request may be, what was refused and a summary line about it at most once a minute.

The protocol that applies them to each connection is in server.compat.uvicorn_gate; this module holds
the counts and the policy, with no I/O of its own but a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from server.config import Settings

log = logging.getLogger(__name__)

GLOBAL = "global"
PER_ADDRESS = "per_address"
HEAD_TOO_LARGE = "head_too_large"
HEAD_TIMEOUT = "head_timeout"
BODY_TIMEOUT = "body_timeout"
SEND_TIMEOUT = "send_timeout"
REASONS = (GLOBAL, PER_ADDRESS, HEAD_TOO_LARGE, HEAD_TIMEOUT, BODY_TIMEOUT, SEND_TIMEOUT)
# Descriptors kept for everything but client connections: Redis connections, the embedded Redis's pipes,
# log and data files, the listening socket. A quarter of the limit when the limit is small.
RESERVED_DESCRIPTORS = 1024
SUMMARY_SECONDS = 60.0
# Addresses named in a summary line; and how many distinct ones a minute's tally follows (memory stays
# bounded when refusals come from very many addresses).
SUMMARY_ADDRESSES = 5
TRACKED_ADDRESSES = 1024


def raise_descriptor_limit() -> int:
    """Raise this process's RLIMIT_NOFILE soft limit to its hard limit; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        # Some kernels (macOS) refuse an unlimited or very large soft limit: keep what was there.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def fitted(wanted: int, descriptors: int) -> int:
    """The connections allowed at once: `wanted`, or fewer so that they fit in `descriptors` with room
    for the process's other descriptors."""
    room = descriptors - min(RESERVED_DESCRIPTORS, descriptors // 4)
    return max(1, min(wanted, room))


def address_key(peername: object) -> str:
    """The client address a connection counts against: its IPv4 address, or the /56 prefix of an IPv6
    one; IPv4-mapped IPv6 addresses count as IPv4."""
    if not isinstance(peername, tuple) or not peername or not isinstance(peername[0], str):
        return "local"  # a unix socket, or a transport that does not say
    host = peername[0]
    if ":" not in host:
        return host
    host = host.split("%", 1)[0]  # a link-local address's zone
    if host.startswith("::ffff:") and "." in host:
        return host[7:]
    try:
        packed = socket.inet_pton(socket.AF_INET6, host)
    except OSError:
        return host
    # A single host commonly holds a whole /64, and a single customer (a home, a rented server) a /56 or
    # more: counted by /64, one customer would have 256 limits' worth of connections.
    return socket.inet_ntop(socket.AF_INET6, packed[:7] + bytes(9)) + "/56"


@dataclass(frozen=True)
class Limits:
    """What a connection may do. `max_per_address` 0: no per-address limit."""

    max_connections: int
    max_per_address: int
    max_head_bytes: int
    request_timeout: float
    send_timeout: float = 10.0


class ConnectionLimits:
    """The node's open connections by address, and its refusals (since start, and since the last line)."""

    def __init__(
        self,
        limits: Limits,
        *,
        summary_seconds: float = SUMMARY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.open = 0
        self.by_address: dict[str, int] = {}
        self.refused: dict[str, int] = dict.fromkeys(REASONS, 0)
        self._summary_seconds = summary_seconds
        self._clock = clock
        self._tally: dict[str, int] = {}
        self._tally_addresses: dict[str, int] = {}
        self._last_line = -math.inf
        self._flush: asyncio.TimerHandle | None = None

    def admit(self, address: str) -> str | None:
        """Count a new connection from `address`; or the reason it is refused (and then not counted)."""
        limits = self.limits
        if self.open >= limits.max_connections:
            return GLOBAL
        if limits.max_per_address:
            held = self.by_address.get(address, 0)
            if held >= limits.max_per_address:
                return PER_ADDRESS
            self.by_address[address] = held + 1
        self.open += 1
        return None

    def release(self, address: str) -> None:
        """An admitted connection from `address` has closed."""
        self.open -= 1
        if self.limits.max_per_address:
            held = self.by_address[address] - 1
            if held:
                self.by_address[address] = held
            else:
                del self.by_address[address]

    def refuse(self, reason: str, address: str) -> None:
        """Count a refusal; the summary line goes out now if none did for a minute, else when it is due."""
        self.refused[reason] += 1
        self._tally[reason] = self._tally.get(reason, 0) + 1
        addresses = self._tally_addresses
        if address in addresses or len(addresses) < TRACKED_ADDRESSES:
            addresses[address] = addresses.get(address, 0) + 1
        if self._flush is not None:
            return
        due = self._last_line + self._summary_seconds - self._clock()
        if due <= 0:
            self.summarize()
        else:
            self._flush = asyncio.get_running_loop().call_later(due, self.summarize)

    def summarize(self) -> None:
        """Log the refusals counted since the last line (nothing when there are none)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        tally, addresses = self._tally, self._tally_addresses
        if not tally:
            return
        self._tally, self._tally_addresses = {}, {}
        now = self._clock()
        since = now - self._last_line
        self._last_line = now
        counts = ", ".join(f"{reason} {tally[reason]}" for reason in REASONS if reason in tally)
        top = sorted(addresses.items(), key=lambda item: -item[1])[:SUMMARY_ADDRESSES]
        window = f" in the last {since:.0f} s" if math.isfinite(since) else ""
        # Refused for a limit: a flood or a node too small for its clients. Timeouts alone also come from
        # browsers' unused speculative connections: worth a line, not a warning.
        level = logging.WARNING if GLOBAL in tally or PER_ADDRESS in tally else logging.INFO
        log.log(
            level,
            f"connections refused{window}: {counts}",
            extra={"refused": tally, "peers": dict(top), "count": sum(tally.values())},
        )


def from_settings(settings: Settings) -> ConnectionLimits:
    """The node's limits: its descriptor limit raised to the hard limit first, and the global limit
    lowered (and said so) when it would not fit."""
    descriptors = raise_descriptor_limit()
    allowed = fitted(settings.max_connections, descriptors)
    if allowed < settings.max_connections:
        log.warning(
            f"connection limit lowered from {settings.max_connections} to {allowed} to fit this process's "
            f"descriptor limit of {descriptors} (raise it: ulimit -n, LimitNOFILE, compose ulimits)",
            extra={"count": allowed},
        )
    return ConnectionLimits(
        Limits(
            max_connections=allowed,
            max_per_address=settings.max_connections_per_address,
            max_head_bytes=settings.max_head_bytes,
            request_timeout=settings.request_timeout,
            send_timeout=settings.send_timeout,
        )
    )
