"""What every route needs, built once per app in its lifespan and found at `app.state.ctx`."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.config import Settings
from server.engine.games import Games
from server.engine.presence import PresenceTracker
from server.engine.signing import Keyring
from server.engine.wall import Wall
from server.metrics import Metrics
from server.web.throttle import AddressThrottle


@dataclass
class Context:
    """Everything a request handler needs, built once per app."""

    settings: Settings
    games: Games
    # Who is connected to each game, on every node (server.engine.presence).
    presence: PresenceTracker
    metrics: Metrics = field(default_factory=Metrics)
    # The public keys of this node's signing key and of its retired ones (GET /signing-keys).
    keys: Keyring = field(default_factory=Keyring)
    # How fast each client address may create games (from the settings).
    creations: AddressThrottle = field(init=False)
    # The node's wall of public games (server.engine.wall): runs while anyone watches it.
    wall: Wall = field(init=False)

    def __post_init__(self) -> None:
        self.creations = AddressThrottle(self.settings.create_rate_per_minute, self.settings.create_burst)
        self.wall = Wall(
            self.games,
            presence=self.presence,
            live_games=self.settings.wall_live_games,
            ended_games=self.settings.wall_ended_games,
            idle_seconds=self.settings.wall_idle_seconds,
            creator_share=self.settings.wall_creator_share,
            page_games=self.settings.wall_page_games,
        )
