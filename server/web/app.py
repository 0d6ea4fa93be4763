"""The composition root: `create_app(settings, store=None)` wires the store, the games, presence and routes.

The event store is opened (and an embedded redis-server started, when no Redis URL is configured) in the
app's lifespan, not around uvicorn's run call: uvicorn re-raises SIGTERM after its own shutdown, so code
placed after the run call never runs, while the lifespan's exit always does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route, WebSocketRoute

from server.auth import api_key_problem
from server.config import Settings, redis_url_problem
from server.connections import ConnectionLimits
from server.engine import listing
from server.engine.games import Games
from server.engine.presence import Presence
from server.metrics import Metrics
from server.ops import signing_keys
from server.ops.embedded_redis import EmbeddedRedis
from server.store import EventStore, StoreError
from server.store.redis import RedisEventStore
from server.web import http, pages, tables, wall, ws
from server.web.access import AccessLog
from server.web.context import Context

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    store: EventStore | None = None,
    connections: ConnectionLimits | None = None,
) -> Starlette:
    """The ASGI app. With no `store`, it opens Redis (embedded or `settings.redis_url`) on startup."""
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # `orchestra serve` says so before it starts; this stops an app started any other way too.
        problem = api_key_problem(settings.api_key) or redis_url_problem(settings.redis_url)
        if problem is not None:
            raise RuntimeError(problem)
        # The signing key first: a key that cannot be read or made stops the node before anything starts.
        signer = signing_keys.load_signer(settings, create=True)
        assert signer is not None
        keys = signing_keys.keyring(settings, signer)
        log.info("signing envelopes", extra={"key_id": signer.key_id})
        embedded: EmbeddedRedis | None = None
        redis_info: tuple[str, str] | None = None  # the Redis's version, and whether it is embedded
        opened = store
        if opened is None:
            url = settings.redis_url
            if url is None:
                embedded = EmbeddedRedis(Path(settings.data_dir), maxmemory=settings.embedded_redis_maxmemory)
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
            try:
                opened = await RedisEventStore.from_url(
                    url,
                    settings.redis_cluster,
                    timeout=settings.command_timeout,
                    pool_size=settings.redis_pool_size,
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
        presence = Presence(opened, heartbeat=settings.presence_heartbeat, expiry=settings.presence_expiry)
        presence.start()
        ctx = Context(
            settings=settings, games=games, presence=presence, metrics=metrics, embedded=embedded, keys=keys
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
            if embedded is not None:
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
