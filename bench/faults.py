"""Faults on a schedule against a replicated Redis and several server nodes, every client's history judged.

A Redis setup (`--setup cluster`: 3 primaries and 3 replicas; `--setup sentinel`: a primary, its
`--replicas` replicas and three Sentinels; bench/fault_setups.py) and `--nodes` server nodes (child
processes) start on this machine;
`--games` games are played, each by two players on two different nodes and followed by a spectator on a
third, every command with its own id (retried with the same id after `unavailable`). Meanwhile, one at a
time and each bounded in time, faults from `--faults`:

    kill_master    kill -9 of a primary (the one holding the most games, as for every fault of a primary);
                   it comes back (empty) and is made a replica
    kill_node      kill -9 of a server node; it starts again on the same port
    stop_master    SIGSTOP of a primary past the failover timeout, then SIGCONT (it wakes a primary no
                   more: what it takes meanwhile must not count)
    lag_kill       a primary's replicas stopped and cut off, LAG_SECONDS of writes on the primary alone,
                   kill -9 of the primary, the replicas woken and one promoted: what `primary`
                   acknowledged meanwhile is lost (clients see 4001); above `primary` it was never
                   acknowledged
    partition_node a server node cut from Redis (and the Sentinels) for PARTITION_SECONDS, its clients
                   still reaching it, then healed (Sentinel setup only; needs root, `ip` and `nft`: each
                   node then runs in a network namespace of its own, bench/partitions.py)

Every send, answer, envelope received and close code is recorded; at the end each game's stream is read
back and bench/history.py judges the lot. Printed and saved (bench/results/faults.json): the verdict,
acknowledged commands lost per level and per fault, seconds without service per fault.

    python -m bench faults [--quick] [--setup cluster|sentinel] [--ack primary|replica|replica_fsync]
                           [--games 12] [--seconds 60] [--fault-count 6] [--nodes 3] [--replicas 1]

`--seconds` spreads the faults (one every seconds / (count + 1)); play goes on until the last one ended.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import signal
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bench.common import ServerProcess, free_port, say, write_result
from bench.fault_setups import ClusterSetup, SentinelSetup, cut_off, replicas_of
from bench.games import legal_placements
from bench.history import (
    Answered,
    ClientHistory,
    Closed,
    Fault,
    Received,
    Sent,
    StoredEnvelope,
    Verdict,
    check,
    digest,
)
from bench.partitions import HOST, Namespaces, supported
from orchestra_client import ConnectionRefused, GameClient, create_game, get_events
from tests.support.redis import RedisProcess

FAULTS = ("kill_master", "kill_node", "stop_master", "lag_kill", "partition_node")
# The faults a run makes without asking for them by name: partitions need root and namespaces.
DEFAULT_FAULTS = ("kill_master", "kill_node", "stop_master", "lag_kill")
ACK_LEVELS = ("primary", "replica", "replica_fsync")
# The quick run's: a loss at `primary` (the checker must see it) and a node killed.
QUICK_FAULTS = ("lag_kill", "kill_node")
# How long a lag_kill's primary takes writes no replica gets.
LAG_SECONDS = 1.0
# How long a partitioned node is cut from Redis: past the store's command timeout, so that its commands
# answer unavailable and its tails give up and come back.
PARTITION_SECONDS = 6.0
# Every fault ends within this (the Cluster healthy again, the node back), or the run says so.
FAULT_BOUND = 30.0
ANSWER_TIMEOUT = 15.0
# Retries of one command after `unavailable` or no answer, before the game is given up as a problem.
RETRIES = 200
# Sends of one command in a row without an answer before its game is given up as a problem: every
# fault ends within FAULT_BOUND, so a client still unanswered well past it has stalled.
SILENT_SENDS = 4
# Play goes on this long after the last fault has ended: each fault's outage is measured to its end.
AFTER_LAST_FAULT = 3.0


def now() -> float:
    """The run's clock (monotonic seconds), shared by records and faults."""
    return time.monotonic()


class RecordingClient(GameClient):
    """A GameClient that records every envelope it receives and every close, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.history = ClientHistory("", self.game_id, "")

    def _dispatch(self, frame: dict[str, Any]) -> None:
        if frame.get("type") == "events":
            for envelope in frame["envelopes"]:
                record = Received(envelope["version"], digest(envelope), envelope.get("command_id"), now())
                self.history.records.append(record)
        super()._dispatch(frame)

    async def _resume(self) -> bool:
        self._note_close()
        return await super()._resume()

    def _ended(self) -> None:
        if not self._closing:
            self._note_close()
        super()._ended()

    def _note_close(self) -> None:
        code = self.closed_with[0] if self.closed_with else None
        self.history.records.append(Closed(code, now()))


Setup = ClusterSetup | SentinelSetup
SETUPS: dict[str, type[ClusterSetup] | type[SentinelSetup]] = {
    "cluster": ClusterSetup,
    "sentinel": SentinelSetup,
}


@dataclass
class Run:
    """The run's parts: the Redis setup, the server nodes (by port), and what happened."""

    setup: Setup
    ports: list[int]
    env: dict[str, str]
    # Each node in a network namespace of its own (node i in namespace i), when the run partitions.
    namespaces: Namespaces | None = None
    servers: dict[int, ServerProcess] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    failovers: dict[str, bool | None] = field(default_factory=dict)
    game_ids: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def start_node(self, port: int) -> ServerProcess:
        """A server node on `port` (the same port again after a kill, so that its clients come back)."""
        args, wrapper = ["--port", str(port)], []
        if self.namespaces is not None:
            index = self.ports.index(port)
            args += ["--host", self.namespaces.address(index)]
            wrapper = self.namespaces.wrapper(index)
        server = ServerProcess("ours", self.setup.url, env=self.env, args=args, wrapper=wrapper)
        self.servers[port] = server
        return server

    def url(self, index: int) -> str:
        index %= len(self.ports)
        host = "127.0.0.1" if self.namespaces is None else self.namespaces.address(index)
        return f"http://{host}:{self.ports[index]}"


async def _play(run: Run, game_id: str, players: list[RecordingClient], stopping: asyncio.Event) -> None:
    """The two players in turn until `stopping`, every command with its id, retried after `unavailable`."""
    pairs = [(msgspec.to_builtins(token), space) for token, space in legal_placements()]
    for turn in itertools.count():
        if stopping.is_set():
            return
        player = players[turn % 2]
        token, space = pairs[(turn * 7 + turn % 2) % len(pairs)]
        frame = {"type": "place", "token": token, "space": space, "id": f"{game_id}-{turn}"}
        silent = 0
        for _ in range(RETRIES):
            player.history.records.append(Sent(frame["id"], now()))
            try:
                # Bounded here too: the client holds a send until it is connected again.
                sent = player.send(frame, timeout=ANSWER_TIMEOUT)
                answer = await asyncio.wait_for(sent, ANSWER_TIMEOUT + 5)
            except TimeoutError:
                player.history.records.append(Answered(frame["id"], "timeout", 0, now()))
                silent += 1
                if silent >= SILENT_SENDS:
                    said = f"{frame['id']} unanswered {silent} times"
                    run.problems.append(f"{game_id}: {said}; {_state(player)}")
                    return
                continue
            except ConnectionRefused as exc:
                player.history.records.append(Answered(frame["id"], f"closed {exc.code}", 0, now()))
                run.problems.append(f"{game_id}: a player's session ended ({exc.code} {exc.reason})")
                return
            outcome = "accepted" if answer["type"] == "accepted" else answer.get("code", "?")
            count = len(answer.get("events", ())) or 1
            player.history.records.append(Answered(frame["id"], outcome, answer["version"], now(), count))
            if outcome == "accepted":
                break
            if outcome not in ("unavailable", "store_full"):
                run.problems.append(f"{game_id}: {frame['id']} answered {outcome}: {answer.get('message')}")
                return
            await asyncio.sleep(0.2)
        else:
            run.problems.append(f"{game_id}: {frame['id']} never accepted")
            return
        await asyncio.sleep(0.05)


def _state(client: RecordingClient) -> str:
    """Where a stalled client stands: the last envelope it received, its last close, its version."""
    received = [r for r in client.history.records if isinstance(r, Received)]
    closes = [r for r in client.history.records if isinstance(r, Closed)]
    last = f"last envelope received {received[-1].version}" if received else "no envelope received"
    close = f", last close {closes[-1].code} at {closes[-1].at:.1f}" if closes else ""
    return f"{last}{close}, client version {client.version}, connected {client._connected.is_set()}"


async def _open_game(run: Run, index: int, level: str) -> tuple[str, list[RecordingClient]]:
    game = await create_game(run.url(index), ["Ada", "Ben"])
    game_id = game["game_id"]
    clients: list[RecordingClient] = []
    for offset, token in enumerate([*(seat["token"] for seat in game["seats"]), None]):
        client = await RecordingClient.connect(run.url(index + offset), game_id, token, timeout=30)
        assert isinstance(client, RecordingClient)  # connect builds its own class
        client.history.client = f"{game_id}/{'spectator' if token is None else f'seat{offset}'}"
        client.history.level = level
        clients.append(client)
    return game_id, clients


async def _wait(condition: Any, timeout: float) -> bool:
    deadline = now() + timeout
    while now() < deadline:
        if await asyncio.to_thread(condition):
            return True
        await asyncio.sleep(0.2)
    return False


async def _fault(run: Run, kind: str, number: int, rng: random.Random) -> None:
    name = f"{kind}#{number}"
    start = now()
    setup = run.setup
    failed_over = None
    if kind in ("kill_master", "stop_master", "lag_kill"):
        victim = await asyncio.to_thread(_busiest, run, rng)
        process = victim.process
        assert process is not None
        if kind == "lag_kill":
            failed_over = await _lag_kill(setup, victim)
        elif kind == "kill_master":
            victim.kill()
            failed_over = await _wait(lambda: setup.failed_over(victim), FAULT_BOUND)
            victim.start()
        else:
            process.send_signal(signal.SIGSTOP)
            await asyncio.sleep(setup.stop_seconds)
            failed_over = await asyncio.to_thread(setup.failed_over, victim)
            process.send_signal(signal.SIGCONT)
        if not failed_over:
            run.problems.append(f"{name}: no replica promoted within the fault")
        if not await _wait(setup.healthy, FAULT_BOUND):
            run.problems.append(f"{name}: the {setup.name} was not whole again within {FAULT_BOUND} s")
    elif kind == "kill_node":
        port = rng.choice(run.ports)
        run.servers[port].kill()
        run.servers[port].stop()
        await asyncio.sleep(1.0)
        await asyncio.to_thread(run.start_node, port)
    elif kind == "partition_node":
        assert run.namespaces is not None  # main() gives a partitioning run its namespaces
        index = rng.randrange(len(run.ports))
        await asyncio.to_thread(run.namespaces.cut, index, [p.port for p in setup.processes])
        try:
            await asyncio.sleep(PARTITION_SECONDS)
        finally:
            await asyncio.to_thread(run.namespaces.heal, index)
    else:
        raise ValueError(f"unknown fault {kind!r}")
    run.faults.append(Fault(name, start, now()))
    run.failovers[name] = failed_over
    say(f"  {name}: {now() - start:.1f} s")


def _busiest(run: Run, rng: random.Random) -> RedisProcess:
    """The primary holding the most games (a fault on it stalls the most), ties broken at random."""
    primaries = run.setup.primaries() or run.setup.nodes
    held = Counter(run.setup.holder(game_id) for game_id in run.game_ids)
    most = max(held[node.port] for node in primaries)
    return rng.choice([node for node in primaries if held[node.port] == most])


async def _lag_kill(setup: Setup, victim: RedisProcess) -> bool:
    """Stop the victim's replicas and cut them off, let it take writes alone, kill it, wake them."""
    stopped = await asyncio.to_thread(replicas_of, victim, setup.nodes)
    try:
        for replica in stopped:
            assert replica.process is not None
            replica.process.send_signal(signal.SIGSTOP)
        await asyncio.to_thread(cut_off, victim)
        await asyncio.sleep(LAG_SECONDS)
        victim.kill()
    finally:
        for replica in stopped:
            if replica.process is not None:
                replica.process.send_signal(signal.SIGCONT)
    promoted = await _wait(lambda: setup.failed_over(victim), FAULT_BOUND)
    victim.start()
    return promoted


async def _schedule(
    run: Run, kinds: list[str], count: int, every: float, rng: random.Random, stopping: asyncio.Event
) -> None:
    """`count` faults, one at a time, `every` seconds apart (and at least `every` after the previous ended);
    then play stops."""
    for number in range(count):
        await asyncio.sleep(every)
        await _fault(run, kinds[number % len(kinds)], number, rng)
    await asyncio.sleep(AFTER_LAST_FAULT)
    stopping.set()


async def _final_streams(run: Run, game_ids: list[str]) -> dict[str, list[StoredEnvelope]]:
    streams = {}
    for game_id in game_ids:
        envelopes = await get_events(run.url(0), game_id)
        streams[game_id] = [StoredEnvelope(e["version"], digest(e), e.get("command_id")) for e in envelopes]
    return streams


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    # SIGTERM (a `timeout` around the run, say) cancels the run as Ctrl-C does: every process it started
    # is stopped and the namespaces are removed on the way out.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    namespaces = Namespaces(args.nodes).open() if "partition_node" in args.faults else None
    try:
        return await _run(args, namespaces)
    finally:
        if namespaces is not None:
            namespaces.close()


def _start_setup(args: argparse.Namespace, namespaces: Namespaces | None) -> Setup:
    root = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    if args.setup == "cluster":
        return ClusterSetup(root)
    return SentinelSetup(root, replicas=args.replicas, host=HOST if namespaces is not None else "127.0.0.1")


async def _run(args: argparse.Namespace, namespaces: Namespaces | None) -> dict[str, Any]:
    setup = await asyncio.to_thread(_start_setup, args, namespaces)
    env = dict(setup.env)
    if args.ack != "primary":
        env["ORCHESTRA_ACK"] = args.ack
    run = Run(setup, [free_port() for _ in range(args.nodes)], env, namespaces)
    clients: list[RecordingClient] = []
    try:
        for port in run.ports:
            await asyncio.to_thread(run.start_node, port)
        say(
            f"faults: {setup.name}"
            + (f" ({args.replicas} replicas)" if args.setup == "sentinel" else "")
            + f", ack {args.ack}, {args.nodes} server nodes{' in namespaces' if namespaces else ''}, "
            f"{args.games} games"
        )
        opened = [await _open_game(run, index, args.ack) for index in range(args.games)]
        clients = [client for _, group in opened for client in group]
        run.game_ids = [game_id for game_id, _ in opened]
        every = args.seconds / (args.fault_count + 1)
        rng = random.Random(args.seed)
        stopping = asyncio.Event()
        schedule = _schedule(run, args.faults, args.fault_count, every, rng, stopping)
        await asyncio.gather(
            schedule, *(_play(run, game_id, group[:2], stopping) for game_id, group in opened)
        )
        # Every client follows its game to the end before the streams are read (a resume may be under way).
        await asyncio.sleep(2.0)
        streams = await _final_streams(run, [game_id for game_id, _ in opened])
        histories = [c.history for c in clients]
        verdict = check(histories, streams, run.faults)
        report = _report(args, run, verdict, histories, sum(len(s) for s in streams.values()))
        report["rejected_histories"] = _rejected(verdict, histories, streams)
        return report
    finally:
        for client in clients:
            await client.close()
        for server in run.servers.values():
            server.stop()
        for process in setup.processes:
            if process.process is not None:
                process.process.send_signal(signal.SIGCONT)
            process.stop()


# What the result keeps of a client whose history broke a rule: its last records, and the stream's end.
KEPT_RECORDS = 60


def _rejected(
    verdict: Verdict, histories: list[ClientHistory], streams: dict[str, list[StoredEnvelope]]
) -> list[dict[str, Any]]:
    """The tail of each history that broke a rule not tolerated at its level, beside the final stream's."""
    named = {(a.game_id, a.client) for a in verdict.anomalies if not a.tolerated}
    kept = []
    for history in histories:
        if (history.game_id, history.client) not in named:
            continue
        kept.append(
            {
                "client": history.client,
                "level": history.level,
                "last_records": [
                    {"record": type(r).__name__, **msgspec.to_builtins(r)}
                    for r in history.records[-KEPT_RECORDS:]
                ],
                "stream_end": msgspec.to_builtins(streams.get(history.game_id, [])[-10:]),
            }
        )
    return kept


def _report(
    args: argparse.Namespace, run: Run, verdict: Verdict, histories: list[ClientHistory], envelopes: int
) -> dict[str, Any]:
    records = [r for h in histories for r in h.records]
    return {
        "quick": args.quick,
        "setup": args.setup,
        "replicas": args.replicas if args.setup == "sentinel" else 1,
        "nodes": args.nodes,
        "ack": args.ack,
        "games": args.games,
        "seconds": args.seconds,
        "faults": [
            {"name": f.name, "seconds": round(f.end - f.start, 2), "failed_over": run.failovers.get(f.name)}
            for f in run.faults
        ],
        "envelopes_stored": envelopes,
        "envelopes_received": sum(isinstance(r, Received) for r in records),
        "commands_sent": sum(isinstance(r, Sent) for r in records),
        "answers": dict(Counter(r.outcome for r in records if isinstance(r, Answered))),
        "closes": {
            str(code): n for code, n in Counter(r.code for r in records if isinstance(r, Closed)).items()
        },
        "problems": run.problems,
        "verdict": verdict.summary(),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a handful of games, two faults (for CI)")
    parser.add_argument("--games", type=int, default=None, help="games played at once")
    parser.add_argument("--seconds", type=float, default=None, help="the time the faults are spread over")
    parser.add_argument("--nodes", type=int, default=3, help="server nodes")
    parser.add_argument("--fault-count", type=int, default=None, help="faults in the run")
    parser.add_argument(
        "--faults",
        type=lambda text: [k for k in text.split(",") if k],
        default=None,
        help=f"kinds in turn, comma-separated, of {', '.join(FAULTS)} (default: all but partition_node; "
        f"quick: {','.join(QUICK_FAULTS)})",
    )
    parser.add_argument("--setup", choices=sorted(SETUPS), default="cluster", help="the Redis setup")
    parser.add_argument("--replicas", type=int, default=1, help="the Sentinel setup's replicas (1 or more)")
    parser.add_argument(
        "--ack", choices=ACK_LEVELS, default="primary", help="ORCHESTRA_ACK of the nodes (primary: unset)"
    )
    parser.add_argument("--seed", type=int, default=42, help="which master or node each fault picks")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    args.faults = args.faults or list(QUICK_FAULTS if args.quick else DEFAULT_FAULTS)
    unknown = [kind for kind in args.faults if kind not in FAULTS]
    if unknown:
        raise SystemExit(f"unknown fault(s) {', '.join(unknown)}: choose among {', '.join(FAULTS)}")
    if args.replicas < 1 or (args.replicas != 1 and args.setup != "sentinel"):
        raise SystemExit(
            "--replicas: 1 or more, and only with --setup sentinel (a Cluster has one per master)"
        )
    if "partition_node" in args.faults:
        if args.setup != "sentinel":
            raise SystemExit("partition_node needs --setup sentinel")
        refused = supported()
        if refused is not None:
            raise SystemExit(f"partition_node needs network namespaces and nftables: {refused}")
    args.games = args.games or (3 if args.quick else 12)
    args.seconds = args.seconds or (12.0 if args.quick else 60.0)
    args.fault_count = args.fault_count or (2 if args.quick else 6)
    try:
        result = asyncio.run(_main(args))
    except asyncio.CancelledError:
        raise SystemExit("bench faults: stopped by SIGTERM; its processes and namespaces are gone") from None
    path = write_result("faults", result, argv)
    verdict = result["verdict"]
    say(f"faults: {[f['name'] for f in result['faults']]}")
    say(f"accepted {verdict['accepted']}, anomalies {verdict['anomalies'] or 'none'}, ok={verdict['ok']}")
    say(f"lost per level {verdict['lost_by_level']}, per fault {verdict['lost_by_fault']}")
    say(f"seconds without service per fault {verdict['outage_seconds_by_fault']}")
    for problem in result["problems"][:10]:
        say(f"  problem: {problem}")
    say(f"written {path}")
    return 0 if verdict["ok"] and not result["problems"] else 1
