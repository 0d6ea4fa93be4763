"""What every route needs, built once per app in its lifespan and found at `app.state.ctx`."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.config import Settings
from server.engine.games import Games
from server.engine.signing import Keyring
from server.metrics import Metrics
from server.ops.embedded_redis import EmbeddedRedis


@dataclass
class Context:
    """Everything a request handler needs, built once per app."""

    settings: Settings
    games: Games
    metrics: Metrics = field(default_factory=Metrics)
    embedded: EmbeddedRedis | None = None
    # The public keys of this node's signing key and of its retired ones (GET /signing-keys).
    keys: Keyring = field(default_factory=Keyring)
