"""The composition root: `create_app(...)` wires the store, the games, presence and routes.

What backs the node is handed to it by `server.ops` (server.ops.runner): the signing key, the keys it
trusts and, when no Redis URL is configured, the embedded Redis (not started). The event store is opened
(and that Redis started) in the app's lifespan, not around uvicorn's run call: uvicorn re-raises SIGTERM
after its own shutdown, so code placed after the run call never runs, while the lifespan's exit always
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route, WebSocketRoute

from server.auth import api_key_problem
from server.config import Settings, redis_url_problem
from server.connections import ConnectionLimits
from server.engine import listing
from server.engine.games import Games
from server.engine.presence import PresenceTracker
from server.engine.signing import Keyring, Signer
from server.metrics import Metrics
from server.store import EventStore, StoreError
from server.store.redis import AckLevelRefused, RedisEventStore
from server.web import http, pages, records, tables, wall, ws
from server.web.access import AccessLog
from server.web.context import Context

log = logging.getLogger(__name__)


class RedisBinary(Protocol):
    """The redis-server an embedded Redis runs: where it is and the version it reports."""

    @property
    def path(self) -> str: ...

    @property
    def version_text(self) -> str: ...


class EmbeddedRedis(Protocol):
    """A redis-server the node runs over its data directory (server.ops.embedded_redis.EmbeddedRedis)."""

    @property
    def binary(self) -> RedisBinary | None: ...

    @property
    def socket(self) -> object: ...

    async def start(self) -> str:
        """Start it; its URL (with its password) once it answers."""
        ...

    async def stop(self, timeout: float = ...) -> None:
        """Stop it."""
        ...


def create_app(
    settings: Settings | None = None,
    store: EventStore | None = None,
    connections: ConnectionLimits | None = None,
    *,
    signer: Signer | None = None,
    keys: Keyring | None = None,
    embedded: EmbeddedRedis | None = None,
) -> Starlette:
    """The ASGI app: envelopes signed by `signer`, the keys of `keys` published. With no `store`, it opens
    Redis on startup: `embedded` (started then) when given, else `settings.redis_url`."""
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # `orchestra serve` says so before it starts; this stops an app started any other way too.
        problem = api_key_problem(settings.api_key) or redis_url_problem(settings.redis_url)
        if problem is not None:
            raise RuntimeError(problem)
        if signer is None:
            raise RuntimeError("the node has no signing key: server.ops hands create_app its signer")
        log.info("signing envelopes", extra={"key_id": signer.key_id})
        redis_info: tuple[str, str] | None = None  # the Redis's version, and whether it is embedded
        opened = store
        if opened is None:
            url = settings.redis_url
            if embedded is not None:
                url = await embedded.start()
                assert embedded.binary is not None
                redis_info = (embedded.binary.version_text, "true")
                # Its URL holds its password: the log names the socket instead.
                log.info(
                    "embedded redis started",
                    extra={
                        "url": f"unix://{embedded.socket}",
                        "path": str(settings.data_dir),
                        "binary": embedded.binary.path,
                        "redis_version": embedded.binary.version_text,
                    },
                )
            if url is None:
                raise RuntimeError("no Redis: neither ORCHESTRA_REDIS_URL nor an embedded Redis is given")
            try:
                opened = await RedisEventStore.from_url(
                    url,
                    settings.redis_cluster,
                    timeout=settings.command_timeout,
                    pool_size=settings.redis_pool_size,
                    # The embedded Redis has no replica: a level above primary is refused there.
                    ack=settings.ack if embedded is None else _no_replica(settings.ack),
                    ack_timeout_ms=settings.ack_timeout_ms,
                )
            except BaseException:
                if embedded is not None:
                    await embedded.stop()
                raise
            if redis_info is None:
                redis_info = (await _server_version(opened), "false")
        metrics = Metrics(connections)
        if redis_info is not None:
            metrics.redis_info.labels(*redis_info).set(1)
        games = Games(
            opened,
            metrics=metrics,
            max_placements=settings.max_placements,
            retries=settings.conflict_retries,
            command_timeout=settings.command_timeout,
            max_live_games=settings.max_live_games,
            max_games=settings.max_games,
            view_cache_bytes=settings.view_cache_bytes,
            signer=signer,
        )
        presence = PresenceTracker(
            opened, heartbeat=settings.presence_heartbeat, expiry=settings.presence_expiry
        )
        presence.start()
        ctx = Context(
            settings=settings, games=games, presence=presence, metrics=metrics, keys=keys or Keyring()
        )
        app.state.ctx = ctx
        # Games written before the store's index existed are indexed meanwhile (server.engine.listing).
        backfilling = asyncio.get_running_loop().create_task(listing.backfill_logged(opened))
        # What exists once the node has started (modules, the app, the pools) lives as long as the node:
        # moved out of the collector's sight, a full collection no longer walks it (each pause would land
        # in the latency of every command waiting meanwhile).
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            if connections is not None:
                connections.summarize()  # the refusals since the last line, not left for a line never written
            backfilling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await backfilling
            await presence.close()  # this node's connections stop counting at once, not after the expiry
            await ctx.wall.close()
            await games.close()  # a command still waiting is answered unavailable, not dropped
            if store is None:
                await opened.close()
            if embedded is not None and store is None:
                await embedded.stop()
                log.info("embedded redis stopped")

    routes = [
        Route("/games", http.create_game, methods=["POST"]),
        Route("/games", http.list_games, methods=["GET"]),
        *tables.routes,  # before /games/{game_id}: GET /games/open is no game
        Route("/games/{game_id}", http.get_game, methods=["GET"]),
        Route("/games/{game_id}/events", http.get_events, methods=["GET"]),
        WebSocketRoute("/games/{game_id}/ws", ws.game_socket),
        WebSocketRoute("/wall/ws", wall.wall_socket),
        Route("/healthz", http.healthz, methods=["GET"]),
        Route("/readyz", http.readyz, methods=["GET"]),
        Route("/schema.json", http.schema_json, methods=["GET"]),
        Route("/signing-keys", http.signing_keys, methods=["GET"]),
        Route("/metrics", http.metrics, methods=["GET"]),
        *records.routes,
        *pages.routes,
    ]
    # The access log outermost: it times and names every request, whatever answers it.
    return Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(AccessLog)])


async def _server_version(store: RedisEventStore) -> str:
    """The version of the Redis given by URL, for /metrics; "unknown" when it does not say now."""
    try:
        return await store.server_version()
    except StoreError:
        return "unknown"


def _no_replica(ack: str) -> str:
    """`ack` for the embedded Redis, which has no replica to wait for. Raises: AckLevelRefused (above
    primary)."""
    if ack != "primary":
        raise AckLevelRefused(f"ORCHESTRA_ACK={ack} needs a Redis with a replica: set ORCHESTRA_REDIS_URL")
    return ack
