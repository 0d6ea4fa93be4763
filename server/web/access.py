"""The access log: one line per HTTP request and per websocket session, naming the route, never the URL.

A URL may carry anything a client put there, a token included: a query string, or a path that names no
game or no route at all. uvicorn's own access and websocket lines quote the whole target, so they are
off (server.ops.runner, server.ops.logs) and this middleware writes instead: the method, the route's
template (`/games/{game_id}/events`, none for a path no route matches), the status, the duration and
the client's address.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("server.access")

# A method outside these is written as "other": with some HTTP parsers it is any word the client sent.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})


def route_of(scope: Scope) -> str | None:
    """The template of the route that served `scope` (set by the router as it matched), or None."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else None


def peer_of(scope: Scope) -> str | None:
    """The client's address (without its port), as uvicorn gives it."""
    client = scope.get("client")
    return str(client[0]) if client else None


class AccessLog:
    """ASGI middleware writing the access log (logger `server.access`, at info)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        if kind == "websocket":
            try:
                await self.app(scope, receive, send)
            finally:
                self._write("websocket session", scope, None, started)
            return
        status = 500  # what the client gets if the app fails before it answers

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self._write("request", scope, status, started)

    @staticmethod
    def _write(message: str, scope: Scope, status: int | None, started: float) -> None:
        method = scope.get("method")  # None for a websocket
        log.info(
            message,
            extra={
                "method": method if method is None or method in _METHODS else "other",
                "route": route_of(scope),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1e3, 3),
                "peer": peer_of(scope),
            },
        )
