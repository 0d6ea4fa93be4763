"""Settings: one frozen struct, read from ORCHESTRA_* environment variables (typos fail at boot)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec

PREFIX = "ORCHESTRA_"


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything the server can be told; each limit's default is protocol.md's."""

    host: str = "127.0.0.1"
    port: int = 8000
    # None: start and supervise an embedded redis-server in data_dir.
    redis_url: str | None = None
    redis_cluster: bool | None = None
    # Command calls to Redis at once per node; more wait (within command_timeout) for a free connection.
    redis_pool_size: int = 128
    # What `accepted` waits for: the primary's reply, a replica's copy (WAIT), or a replica's fsynced copy
    # (WAITAOF, Redis 7.2+); and how long a round of appends waits for it before answering unavailable.
    ack: Literal["primary", "replica", "replica_fsync"] = "primary"
    ack_timeout_ms: Annotated[int, msgspec.Meta(ge=1, le=60_000)] = 500
    data_dir: str = "var"
    # The club records' database (postgresql://... or sqlite:///path); None: <data_dir>/records.sqlite3.
    records_url: str | None = None
    # The embedded Redis's memory limit (Redis units; "0": none). Full, it refuses writes (noeviction).
    embedded_redis_maxmemory: str = "1gb"
    api_key: str | None = None
    # Games one client address may create: a minute's rate and a burst (0: no limit); and the live games
    # (created, not ended) the whole store may hold (0: no cap).
    create_rate_per_minute: float = 60.0
    create_burst: int = 20
    max_games: int = 100_000
    max_frame_bytes: int = 16 * 1024
    max_body_bytes: int = 16 * 1024
    # An HTTP request's head (request line and headers), and the seconds a client has to send a whole
    # request (from the connection's start or its previous response): past either the connection closes.
    max_head_bytes: int = 16 * 1024
    request_timeout: float = 5.0
    # Seconds an HTTP client whose answer waits unsent must take 16 KiB of it (or all) in: else it is cut.
    send_timeout: float = 10.0
    # "on": every connection passes the gate that applies the limits above and below (server.compat.
    # uvicorn_gate); "off": plain uvicorn, should an upgrade of it break the gate (docs/operations.md says
    # which limits then remain and which the proxy must hold).
    http_gate: Literal["on", "off"] = "on"
    # TCP connections open at once (HTTP and websocket alike), and from one client address (0: no limit).
    max_connections: int = 20_000
    max_connections_per_address: int = 1000
    rate_per_second: float = 50.0
    rate_burst: int = 100
    max_connections_per_game: int = 2000
    hello_timeout: float = 10.0
    queue_limit: int = 100
    # Seconds a connection closed as too slow to read has to read up to its close frame; then it is cut.
    slow_close_grace: float = 30.0
    max_placements: int = 1000
    command_timeout: float = 2.0
    # Two nodes racing for one game each win about half the races, so a command may lose several in a
    # row; each retry is one Redis round trip on fresh state.
    conflict_retries: int = 20
    # Games held folded in memory; the least recently used unfollowed ones are reloaded when needed.
    max_live_games: int = 10_000
    # Bytes of encoded view kept per game, so that a whole view re-encodes only the spaces that changed;
    # the spaces past the budget are encoded again each time a whole view is sent.
    view_cache_bytes: int = 32 * 1024
    # Presence (who is connected to each game, on every node): each node writes its connections to Redis
    # again every heartbeat (seconds); a node's not written again within the expiry no longer count.
    presence_heartbeat: float = 5.0
    presence_expiry: float = 15.0
    # The wall (/wall, /wall/ws): the live public games it shows at most, and the ended ones it keeps (the
    # most recently ended; the oldest retires when another ends).
    wall_live_games: int = 200
    wall_ended_games: int = 8
    # Seconds a live game may go without a placement before it leaves the wall (it comes back with its
    # next one); the share of the live games shown that one creator's address may hold (at least one); and
    # the games of a subscriber's first page, and of each page it asks for after.
    wall_idle_seconds: float = 600.0
    wall_creator_share: float = 0.05
    wall_page_games: int = 24
    log_level: str = "info"
    # "json": a JSON object per line; "text": warnings and errors in words, for people; "auto": text when
    # standard error is a terminal, else JSON (server.ops.logs).
    log_format: Literal["auto", "json", "text"] = "auto"
    # permessage-deflate on websockets: saves bandwidth on slow links, costs CPU per recipient per frame.
    ws_compression: bool = False
    # Frames shared by a game's clients framed once and written straight to each socket (see
    # server.compat.uvicorn); false sends every frame through ASGI, should a uvicorn upgrade break it.
    ws_shared_frames: bool = True
    # The Ed25519 key that signs every envelope: the key itself (base64 of its 32 raw bytes), or a file
    # (PEM); neither: <data_dir>/signing.key, made on first start. Nodes sharing a Redis share one key.
    signing_key: str | None = None
    signing_key_file: str | None = None
    # Retired signing keys, each `<base64 public key>@<time it was retired>` (comma-separated), besides
    # those in <key file>.retired: they verify what they signed before that time.
    signing_retired_keys: str | None = None
    # Accept a signing key file that group or others may read (refused otherwise: it is the key itself).
    signing_key_readable: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.presence_heartbeat < self.presence_expiry:
            # A live node's presence would age out between two of its writes.
            raise ValueError("presence_expiry must be longer than presence_heartbeat (> 0)")


ENV_NAMES = tuple(PREFIX + name.upper() for name in Settings.__struct_fields__)


def from_env(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Settings from ORCHESTRA_* variables, then `overrides` (unset ones keep their defaults).

    Raises:
        ValueError: an unknown ORCHESTRA_* variable or a value of the wrong type.
    """
    environ = os.environ if environ is None else environ
    raw: dict[str, object] = {}
    for key, value in environ.items():
        if key.startswith(PREFIX) and not key.startswith("ORCHESTRA_TEST_"):
            raw[key[len(PREFIX) :].lower()] = value
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return msgspec.convert(raw, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(f"bad ORCHESTRA_* setting: {exc}") from None


def redis_url_problem(url: str | None) -> str | None:
    """Why `url` may not be the Redis URL a server starts with (its password a placeholder word copied
    from an example: deploy/ writes `change-me`), or None when it may."""
    from urllib.parse import unquote, urlsplit

    from server.auth import PLACEHOLDERS

    if url is None:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None  # not a URL at all: the Redis client says so
    folded = "".join(char for char in unquote(password or "").casefold() if char.isalnum())
    for word in PLACEHOLDERS:
        if word in folded:
            return (
                f"ORCHESTRA_REDIS_URL's password holds the placeholder word {word!r}: set a generated one "
                "(openssl rand -hex 24) in Redis and in the URL"
            )
    return None
