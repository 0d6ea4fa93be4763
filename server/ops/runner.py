"""Running the app under uvicorn: one configuration for `orchestra serve` and `orchestra demo`."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette

from server import connections
from server.compat.uvicorn import WS_IMPLEMENTATION, SharedFrameProtocol
from server.compat.uvicorn_gate import gated_http
from server.config import Settings
from server.ops import signing_keys
from server.ops.embedded_redis import EmbeddedRedis
from server.web.app import create_app

T = TypeVar("T")


def forwarded_allow_ips() -> str:
    """The proxies trusted to name the client (FORWARDED_ALLOW_IPS: addresses, networks, `*`); or none."""
    return os.environ.get("FORWARDED_ALLOW_IPS", "").strip()


def uvicorn_server(settings: Settings, graceful_seconds: int = 5) -> uvicorn.Server:
    """A uvicorn server for the app, configured from `settings` (not started). This process's descriptor
    limit is raised to its hard limit (see server.connections)."""
    limits = connections.from_settings(settings)
    gated = settings.http_gate == "on"
    config = uvicorn.Config(
        node_app(settings, limits if gated else None),
        host=settings.host,
        port=settings.port,
        **(_gate(limits) if gated else _plain_http(limits)),
        # The sans-I/O websockets implementation costs the least per message of uvicorn's three; ours
        # adds a direct write of frames shared by many clients (server.compat.uvicorn).
        ws=SharedFrameProtocol if settings.ws_shared_frames else WS_IMPLEMENTATION,
        # Frames up to the limit are read and, when too large, refused politely (too_large); far larger
        # ones are cut off by the protocol layer itself (close 1009) before they are buffered whole.
        ws_max_size=max(4 * settings.max_frame_bytes, 64 * 1024),
        # permessage-deflate compresses every frame once per connection, which undoes "encode once for
        # all recipients" and holds a compressor per connection. Off unless asked for
        # (ORCHESTRA_WS_COMPRESSION=true), for clients on slow links.
        ws_per_message_deflate=settings.ws_compression,
        lifespan="on",
        log_config=None,
        # Its lines quote each request's whole target, query string included: server.web.access writes
        # the access log instead, naming the route.
        access_log=False,
        timeout_graceful_shutdown=graceful_seconds,
        # X-Forwarded-For names the client only when it comes from a proxy FORWARDED_ALLOW_IPS names
        # (uvicorn's own default trusts 127.0.0.1, where anything local may pass a client's header on).
        proxy_headers=bool(forwarded_allow_ips()),
        forwarded_allow_ips=forwarded_allow_ips(),
    )
    return uvicorn.Server(config)


def node_app(settings: Settings, limits: connections.ConnectionLimits | None = None) -> Starlette:
    """The app of a node, handed its signing key (the data directory's default one is made if missing),
    the keys it trusts and, without ORCHESTRA_REDIS_URL, the embedded Redis it starts on startup.

    Raises: SigningKeyError (a key that cannot be read or made: the node does not start).
    """
    signer = signing_keys.load_signer(settings, create=True)
    assert signer is not None  # made when missing
    embedded = None
    if settings.redis_url is None:
        embedded = EmbeddedRedis(Path(settings.data_dir), maxmemory=settings.embedded_redis_maxmemory)
    keys = signing_keys.keyring(settings, signer)
    return create_app(settings, connections=limits, signer=signer, keys=keys, embedded=embedded)


def _gate(limits: connections.ConnectionLimits) -> dict[str, Any]:
    # uvicorn's httptools protocol behind a gate that bounds connections, request heads, the time to send
    # a request and to take an answer, one request at a time (server.compat.uvicorn_gate).
    return {"http": gated_http(limits)}


def _plain_http(limits: connections.ConnectionLimits) -> dict[str, Any]:
    # ORCHESTRA_HTTP_GATE=off: uvicorn's own bounds only, through its documented settings. h11 rather than
    # httptools, because it bounds a request's head; uvicorn answers HTTP requests 503 past the
    # connections it holds, and closes a kept-alive connection idle for the request timeout. The rest is
    # the proxy's (docs/operations.md).
    bounds = limits.limits
    return {
        "http": "h11",
        "h11_max_incomplete_event_size": bounds.max_head_bytes,
        "limit_concurrency": bounds.max_connections,
        "timeout_keep_alive": max(1, math.ceil(bounds.request_timeout)),
    }


async def started_url(server: uvicorn.Server, serving: asyncio.Future[Any] | None = None) -> str | None:
    """The server's base URL once it listens; None if it stopped (or `serving` ended) first."""
    while not server.started:
        if server.should_exit or (serving is not None and serving.done()):
            return None
        await asyncio.sleep(0.05)
    for listener in server.servers:
        for sock in listener.sockets:
            host, port = sock.getsockname()[:2]
            shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
            return f"http://{shown}:{port}"
    return None  # pragma: no cover - a started server always listens


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` on uvloop when it is installed (it ships with uvicorn[standard]), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
