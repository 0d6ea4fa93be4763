"""Prometheus metrics of one server process (a registry per app, so tests can run several apps)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from server.connections import REASONS, ConnectionLimits

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    """Commands by outcome, command latency, connections by role, drops, Redis errors, tail lag, Redis."""

    def __init__(self, connections: ConnectionLimits | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # TCP connections and their refusals, as the node's gate counts them (server.connections).
        r.register(_ConnectionsCollector(connections))
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
        self.damaged = Counter(
            "orchestra_damaged_reads",
            "Reads of a game that found a stored envelope this server cannot decode (damaged_game)",
            registry=r,
        )
        self.history_changed = Counter(
            "orchestra_history_changed",
            "Games read again because their stream no longer held what this node folded (lost writes)",
            registry=r,
        )
        self.redis_info = Gauge(
            "orchestra_redis_info",
            "The Redis the event store runs on (always 1): its version, and whether it is the embedded one",
            ["version", "embedded"],
            registry=r,
        )
        self.creations_refused = Counter(
            "orchestra_creations_refused",
            "Games not created: a client over its rate (rate_limited), or the cap on live games reached",
            ["code"],
            registry=r,
        )
        for role in ("player", "spectator", "wall"):
            self.connections.labels(role)
        for code in ("rate_limited", "too_many_games"):
            self.creations_refused.labels(code)
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


class _ConnectionsCollector(Collector):
    """Reads the gate's counts when scraped (zeros without a gate: an app served by other means)."""

    def __init__(self, connections: ConnectionLimits | None) -> None:
        self.connections = connections

    def collect(self) -> Iterator[Metric]:
        counts = self.connections
        refused = CounterMetricFamily(
            "orchestra_connections_refused",
            "TCP connections closed by the node's limits, by reason",
            labels=["reason"],
        )
        for reason in REASONS:
            refused.add_metric([reason], counts.refused[reason] if counts else 0)
        yield refused
        yield GaugeMetricFamily(
            "orchestra_tcp_connections",
            "Open TCP connections on this node, HTTP and websocket",
            value=counts.open if counts else 0,
        )
        yield GaugeMetricFamily(
            "orchestra_tcp_connections_limit",
            "TCP connections this node accepts at once (ORCHESTRA_MAX_CONNECTIONS or what fits)",
            value=counts.limits.max_connections if counts else 0,
        )
