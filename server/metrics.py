"""Prometheus metrics of one server process (a registry per app, so tests can run several apps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    """Commands by outcome, command latency, connections by role, drops, Redis errors, tail lag."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.commands = Counter(
            "orchestra_commands",
            "Commands answered, by outcome and rejection code",
            ["outcome", "code"],
            registry=r,
        )
        self.latency = Histogram(
            "orchestra_command_seconds",
            "Time from a command's receipt to its acceptance",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.connections = Gauge(
            "orchestra_connections", "Open websocket connections by role", ["role"], registry=r
        )
        self.drops = Counter(
            "orchestra_broadcast_drops", "Connections closed as too slow to read", registry=r
        )
        self.redis_errors = Counter(
            "orchestra_redis_errors", "Event store errors seen by commands and tails", registry=r
        )
        self.tail_lag = Gauge(
            "orchestra_tail_lag_seconds", "Age of the newest envelope when its tail delivered it", registry=r
        )
        self.games = Gauge("orchestra_live_games", "Games held in memory on this node", registry=r)
        for role in ("player", "spectator"):
            self.connections.labels(role)
        # Every accepted command counts here: the child is looked up once, not per command.
        self._accepted = self.commands.labels("accepted", "")

    def accepted(self, seconds: float) -> None:
        """Count an accepted command and its latency."""
        self._accepted.inc()
        self.latency.observe(seconds)

    def rejected(self, code: str) -> None:
        """Count a rejection by its code."""
        self.commands.labels("rejected", code).inc()

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
