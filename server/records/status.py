"""The projector's own HTTP status: GET /metrics (its lag), GET /readyz (200 once caught up), GET /healthz.

A few fixed routes on asyncio's streams: the projector serves nothing else, so it needs no web framework.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from server.records.projector import Lag

_READ_LIMIT = 8192


class Status:
    """Serves the lag `lag()` returns (the projector's last pass) on `host`:`port` (0: any free port)."""

    def __init__(
        self,
        lag: Callable[[], Lag],
        host: str = "127.0.0.1",
        port: int = 0,
        damaged: Callable[[], int] = lambda: 0,
    ) -> None:
        """Not listening until `start`; `damaged()` counts the games the projector found damaged."""
        self._lag, self._host, self._port, self._damaged_count = lag, host, port, damaged
        self._counted = 0
        self._server: asyncio.Server | None = None
        self.registry = CollectorRegistry()
        self._seconds = Gauge(
            "orchestra_records_lag_seconds",
            "Age of the oldest envelope the projector's last pass had still to fold",
            registry=self.registry,
        )
        self._games = Gauge(
            "orchestra_records_games_behind",
            "Games with envelopes not yet folded at the projector's last pass",
            registry=self.registry,
        )
        self._passes = Gauge(
            "orchestra_records_passes", "Passes the projector has made", registry=self.registry
        )
        self._damaged = Counter(
            "orchestra_records_damaged_games",
            "Games whose stream the projector cannot fold or link (an envelope that does not decode, a "
            "version missing, a broken hash chain, an event the fold cannot take), each counted once: left "
            "out of the records until restored",
            registry=self.registry,
        )

    async def start(self) -> int:
        """Listen; the port it listens on."""
        self._server = await asyncio.start_server(self._answer, self._host, self._port)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _metrics(self) -> bytes:
        lag = self._lag()
        self._seconds.set(lag.seconds)
        self._games.set(lag.games_behind)
        self._passes.set(lag.passes)
        count = self._damaged_count()
        if count > self._counted:
            self._damaged.inc(count - self._counted)
            self._counted = count
        return generate_latest(self.registry)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        method, _, rest = head.partition(b" ")
        path = rest.partition(b" ")[0].partition(b"?")[0]
        lag = self._lag()
        if method != b"GET":
            status, body, kind = (
                "405 Method Not Allowed",
                b'{"code": "method_not_allowed"}',
                "application/json",
            )
        elif path == b"/metrics":
            status, body, kind = "200 OK", self._metrics(), "text/plain; version=0.0.4; charset=utf-8"
        elif path == b"/healthz":
            status, body, kind = "200 OK", b'{"status": "ok"}', "application/json"
        elif path == b"/readyz":
            ready = lag.caught_up
            status = "200 OK" if ready else "503 Service Unavailable"
            body = b'{"status": "%s", "games_behind": %d}' % (
                b"ok" if ready else b"catching_up",
                lag.games_behind,
            )
            kind = "application/json"
        else:
            status, body, kind = "404 Not Found", b'{"code": "not_found"}', "application/json"
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()
