"""The Redis setups `python -m bench faults` runs against, started on this machine: a 3-primary,
3-replica Cluster, or a primary, its replicas and three Sentinels. Each says where its primaries are,
whether one was replaced, and when it is whole again.

The Sentinel setup may also listen on an address of this machine besides 127.0.0.1 (`host`, for server
nodes in network namespaces: bench/partitions.py); every node, replica and Sentinel then names each
other by it, so that what the Sentinels hand out is reachable from a namespace too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import redis
from redis.crc import key_slot

from server.ops.embedded_redis import find_redis_server
from server.store.redis.keys import events_key
from tests.support.redis import (
    RedisProcess,
    SentinelProcess,
    command,
    start_cluster,
    wait_for_ping,
)
from tests.support.waiting import until_sync

MASTERS = 3
# How long a Cluster master may be silent before its replica takes over: short, so a run sees many
# failovers, yet long enough that a busy machine does not fail a master over by mistake.
NODE_TIMEOUT_MS = 2000
# The same for the Sentinels: how long the primary may be silent before they call it down.
DOWN_AFTER_MS = 1500
SERVICE = "orchestra-faults"


def role(node: RedisProcess) -> str | None:
    """`master` or `slave` as the node says, None when it does not answer."""
    if node.process is None:
        return None
    try:
        with redis.Redis(port=node.port, socket_timeout=1, socket_connect_timeout=1) as client:
            return str(client.info("replication").get("role"))
    except redis.RedisError:
        return None


def _in_sync(node: RedisProcess) -> bool:
    try:
        with redis.Redis(port=node.port, socket_timeout=1, socket_connect_timeout=1) as client:
            return bool(client.info("replication").get("master_link_status") == "up")
    except redis.RedisError:
        return False


def replicas_of(primary: RedisProcess, nodes: list[RedisProcess]) -> list[RedisProcess]:
    """The nodes that replicate `primary` now, as it lists them."""
    try:
        with redis.Redis(port=primary.port, socket_timeout=1, socket_connect_timeout=1) as client:
            info = client.info("replication")
    except redis.RedisError:
        return []
    ports = {
        int(value["port"])
        for key, value in info.items()
        if key.startswith("slave") and isinstance(value, dict)
    }
    return [node for node in nodes if node.port in ports]


def cut_off(primary: RedisProcess) -> None:
    """Close the primary's replication links (its replicas, stopped, cannot take them up again)."""
    with redis.Redis(port=primary.port, socket_timeout=2) as client:
        client.client_kill_filter(_type="replica")


class ClusterSetup:
    """A Redis Cluster of MASTERS masters, each with one replica."""

    name = "cluster"

    def __init__(self, root: Path) -> None:
        self.nodes, self.url = start_cluster(root, MASTERS, replicas=True, node_timeout_ms=NODE_TIMEOUT_MS)
        self.env = {"ORCHESTRA_REDIS_CLUSTER": "true"}
        # SIGSTOP lasts past the failover timeout: the replica has taken over when the old master wakes.
        self.stop_seconds = NODE_TIMEOUT_MS / 1000 * 2 + 1
        self.processes = self.nodes

    def primaries(self) -> list[RedisProcess]:
        """The nodes that are masters now."""
        return [node for node in self.nodes if role(node) == "master"]

    def holder(self, game_id: str) -> int | None:
        """The port of the master holding the game's stream now."""
        slot = key_slot(events_key(game_id).encode())
        for node in self.primaries():
            try:
                with redis.Redis(port=node.port, socket_timeout=1) as client:
                    ranges = client.execute_command("CLUSTER SLOTS")
            except redis.RedisError:
                continue
            for first, last, master, *_ in ranges:
                if first <= slot <= last:
                    return int(master[1])
        return None

    def failed_over(self, victim: RedisProcess) -> bool:
        """Whether another node serves the victim's slots now."""
        return sum(role(node) == "master" for node in self.nodes if node is not victim) == MASTERS

    def healthy(self) -> bool:
        """Every node up, cluster_state:ok on each, MASTERS masters each with a replica in sync."""
        roles = [role(node) for node in self.nodes]
        if roles.count("master") != MASTERS or roles.count("slave") != MASTERS:
            return False
        for node, held in zip(self.nodes, roles, strict=True):
            try:
                with redis.Redis(port=node.port, socket_timeout=1) as client:
                    if client.cluster("INFO").get("cluster_state") != "ok":
                        return False
            except redis.RedisError:
                return False
            if held == "slave" and not _in_sync(node):
                return False
        return True


class HostSentinel(SentinelProcess):
    """A Sentinel listening on `host` besides 127.0.0.1, watching the primary at `host`."""

    def __init__(
        self, directory: Path, primary: RedisProcess, service: str, down_after_ms: int, host: str
    ) -> None:
        super().__init__(directory, primary, service, down_after_ms)
        self.host = host

    def start(self) -> HostSentinel:
        config = self.directory / "sentinel.conf"
        # One address once: a second listener on the same one fails the start.
        bind = "127.0.0.1" if self.host == "127.0.0.1" else f"127.0.0.1 {self.host}"
        # Sentinel rewrites its own config file (what it learns), so each has one of its own.
        config.write_text(
            f"port {self.port}\nbind {bind}\nprotected-mode no\ndir {self.directory}\n"
            f"logfile sentinel.log\nsentinel monitor {self.service} {self.host} {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.service} 10000\n"
        )
        self.process = subprocess.Popen(
            [find_redis_server(), str(config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        wait_for_ping(self.port, self.process)
        return self


def _acquainted(sentinels: list[HostSentinel], replicas: int) -> bool:
    """Whether every Sentinel knows the others and the primary's `replicas` replicas."""
    for sentinel in sentinels:
        with redis.Redis(port=sentinel.port, socket_timeout=5, decode_responses=True) as client:
            state = command(client, "SENTINEL", "MASTER", SERVICE)
        if isinstance(state, list):
            state = dict(zip(state[::2], state[1::2], strict=True))
        if int(state["num-other-sentinels"]) < len(sentinels) - 1 or int(state["num-slaves"]) < replicas:
            return False
    return True


class SentinelSetup:
    """A primary, its `replicas` replicas, and three Sentinels watching them, all reached at `host`."""

    name = "sentinel"

    def __init__(self, root: Path, replicas: int = 1, host: str = "127.0.0.1") -> None:
        # Named by `host` to each other, and listening there as well as on 127.0.0.1 (where this
        # process's checks reach them).
        options = ("--bind", "127.0.0.1", *([host] if host != "127.0.0.1" else []), "--protected-mode", "no")
        options += ("--replica-announce-ip", host)
        self.primary = RedisProcess(root / "primary", *options)
        self.replicas = [
            RedisProcess(root / f"replica{i}", *options, "--replicaof", host, str(self.primary.port))
            for i in range(replicas)
        ]
        self.sentinels = [
            HostSentinel(root / f"sentinel{i}", self.primary, SERVICE, DOWN_AFTER_MS, host) for i in range(3)
        ]
        self.nodes = [self.primary, *self.replicas]
        self.processes: list[RedisProcess] = [*self.nodes, *self.sentinels]
        try:
            for node in self.processes:
                node.start()
            until_sync(lambda: all(_in_sync(r) for r in self.replicas), 30, "the replicas in sync")
            until_sync(lambda: _acquainted(self.sentinels, replicas), 30, "the Sentinels acquainted")
        except BaseException:
            for process in self.processes:
                process.stop()
            raise
        self.url = "redis+sentinel://" + ",".join(f"{host}:{s.port}" for s in self.sentinels) + f"/{SERVICE}"
        self.env: dict[str, str] = {}
        # Past down-after and the election: the Sentinels have promoted a replica when the old primary
        # wakes, and believes itself the primary still.
        self.stop_seconds = DOWN_AFTER_MS / 1000 * 3 + 2

    def _named_port(self) -> int | None:
        """The primary's port as a majority of the Sentinels name it."""
        ports: list[int] = []
        for sentinel in self.sentinels:
            try:
                with redis.Redis(port=sentinel.port, socket_timeout=1, decode_responses=True) as client:
                    ports.append(int(client.sentinel_get_master_addr_by_name(SERVICE)[1]))
            except (redis.RedisError, TypeError):
                continue
        best = max(set(ports), key=ports.count, default=None)
        return best if best is not None and ports.count(best) >= 2 else None

    def primaries(self) -> list[RedisProcess]:
        """The node the Sentinels name the primary."""
        port = self._named_port()
        return [node for node in self.nodes if node.port == port]

    def holder(self, game_id: str) -> int | None:
        """The port of the primary (every game's)."""
        return self._named_port()

    def failed_over(self, victim: RedisProcess) -> bool:
        """Whether the Sentinels name another primary."""
        port = self._named_port()
        return port is not None and port != victim.port

    def healthy(self) -> bool:
        """The primary the Sentinels name is one, the other nodes its replicas in sync."""
        port = self._named_port()
        for node in self.nodes:
            wanted = "master" if node.port == port else "slave"
            if role(node) != wanted or (wanted == "slave" and not _in_sync(node)):
                return False
        return port is not None
