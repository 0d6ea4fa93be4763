"""Pipeline: the CPU of the server's command path without sockets, against the minimal pipeline's own work.

Ours: `Games.handle` on the in-memory store (each game's owner decides, appends, folds and fans out)
and 8 followers per game whose outboxes send to nothing (the kernel's part of a socket write is not
Python's), 20 games warmed to `--events` events each, commands round-robin over the games, one per
turn of the loop (a round carries
one command, as in open loop at moderate load). The baseline, in the same run: what the minimal pipeline
does per command besides its Redis call and its sockets (decode the command, build and encode one
envelope and its `events` frame, hand it to 8 writers). Process time per command, the best of
`--rounds` rounds; `--callgrind` also counts ours' instructions per command under valgrind
(deterministic, whatever else the machine is doing): the child runs uninstrumented through its start and
warm-up, and `callgrind_control` turns counting on for the measured commands only. Also the
Python cost of sending one 18.5 KB text frame through ASGI (uvicorn's send), the kernel's write left out,
and of signing one envelope line (the Ed25519 signature every command's envelope gets).

    python -m bench pipeline [--events 300] [--commands 2000] [--rounds 6] [--callgrind]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec
from uvicorn.server import ServerState as _State

from bench.common import Callgrind, ratio, say, write_result
from bench.games import legal_placements, place
from server.engine.games import Games
from server.engine.outbox import Outbox
from server.engine.owner import Follower
from server.store.memory import MemoryEventStore

GAMES = 20
FOLLOWERS = 8


class _Placed(msgspec.Struct):
    type: str
    id: str
    token: dict[str, str]
    space: str


class _Envelope(msgspec.Struct):
    game_id: str
    version: int
    at: str
    command_id: str
    seat: int
    event: dict[str, Any]
    prev: str


class _Events(msgspec.Struct, tag="events", tag_field="type"):
    envelopes: list[_Envelope]


def _writer() -> tuple[list[int], Any]:
    written = [0]

    def write(data: bytes) -> None:
        written[0] += 1

    return written, write


def _sender() -> tuple[list[int], Any]:
    sent = [0]

    async def send(data: bytes) -> None:
        sent[0] += 1

    return sent, send


async def _nothing(*_: object) -> None:
    return None


async def _ours(
    events: int, commands: int, rounds: int, pause: Callable[[str], None] | None = None
) -> tuple[list[float], int]:
    """Process time per command of each round; `pause` is called with "ready" before the measured
    rounds and with "done" after them."""
    service = Games(MemoryEventStore(), max_placements=10_000_000, max_live_games=1_000_000)
    written, send = _sender()
    games = [(await service.create(["A", "B", "C"])).game_id for _ in range(GAMES)]
    for game_id in games:
        game = await service.get(game_id)
        assert game is not None
        for _ in range(FOLLOWERS):
            outbox = Outbox(send, _nothing, 100)
            outbox.start()
            game.follow(Follower(outbox))
    pairs = legal_placements()
    counter = itertools.count()

    async def run(count: int) -> float:
        started = time.process_time()
        for k in range(count):
            await service.handle(games[k % GAMES], place((k // GAMES) % 3, next(counter), pairs))
            await asyncio.sleep(0)  # the next command comes in a later turn of the loop
        return (time.process_time() - started) / max(1, count) * 1e6

    await run(GAMES * events)
    if pause is not None:
        pause("ready")
    times = [await run(commands) for _ in range(rounds)]
    if pause is not None:
        pause("done")
    return times, written[0]


def _minimal(commands: int, rounds: int) -> list[float]:
    decode = msgspec.json.Decoder(_Placed).decode
    encode = msgspec.json.Encoder().encode
    written, write = _writer()
    text = '{"type":"place","id":"g1s0n1","token":{"kind":"performance","era":"baroque"},"space":"viola"}'
    times = []
    for _ in range(rounds):
        started = time.process_time()
        for version in range(commands):
            command = decode(text)
            event = {"type": "ChairClaimed", "seat": 0, "space": command.space, "token": command.token}
            envelope = _Envelope("g1", version, "2026-11-30T00:00:00.000Z", command.id, 0, event, "0" * 64)
            frame = encode(_Events([envelope]))
            for _ in range(FOLLOWERS):
                write(frame)
        times.append((time.process_time() - started) / commands * 1e6)
    return times


async def _app(scope: Any, receive: Any, send: Any) -> None:
    return None


class _NoWire:
    """A transport that takes every write and is never closing."""

    def write(self, data: bytes) -> None:
        return None

    def writelines(self, frames: list[bytes]) -> None:
        return None

    def is_closing(self) -> bool:
        return False


def frame_send_us(size: int = 18_500, count: int = 20_000) -> dict[str, float]:
    """Python's cost of sending one text frame of `size` bytes through ASGI (uvicorn's send), on an open
    connection whose transport takes everything."""
    import uvicorn
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    from websockets.protocol import State

    async def measure() -> dict[str, float]:
        config = uvicorn.Config(
            _app, ws=WebSocketsSansIOProtocol, ws_per_message_deflate=False, log_config=None
        )
        config.load()
        protocol = WebSocketsSansIOProtocol(config, _State(), {})
        protocol.transport = _NoWire()  # type: ignore[assignment]
        protocol.handshake_complete = True
        protocol.conn.state = State.OPEN
        text = "x" * size
        message = {"type": "websocket.send", "text": text}
        best: dict[str, float] = {"asgi": float("inf")}
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(count):
                sending = protocol.send(message)  # type: ignore[arg-type]
                with contextlib.suppress(StopIteration):
                    sending.send(None)
            best["asgi"] = min(best["asgi"], (time.perf_counter() - started) / count * 1e6)
        return best

    return asyncio.run(measure())


def signature_us(count: int = 2_000) -> float:
    """The CPU of signing one envelope line as the command path does (Ed25519), best of 5 rounds."""
    from server.engine.signing import ENVELOPE, Signer

    signer = Signer.generate()
    unsigned = b'{"game_id":"g1","version":7,"pad":"' + b"x" * 300 + b'","key":"k","sig":null}'
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for _ in range(count):
            signer.sign(ENVELOPE, unsigned)
        best = min(best, (time.process_time() - started) / count * 1e6)
    return best


def instructions_per_command(events: int, commands: int) -> int | None:
    """Instructions per command of ours under callgrind, counted over the measured commands alone; None
    without valgrind."""
    callgrind = Callgrind.find()
    if callgrind is None:
        return None
    child = [sys.executable, "-m", "bench.pipeline", "--child", str(events), str(commands)]
    process = subprocess.Popen(
        [*callgrind.wrapper(), *child],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said, told = process.stdout, process.stdin
    assert said is not None and told is not None

    def step(expected: str, on: bool) -> bool:
        if said.readline().strip() != expected:
            return False  # the child failed: what it wrote says why
        callgrind.counting(process.pid, on)
        told.write("go\n")
        told.flush()
        return True

    try:
        stepped = step("ready", True) and step("done", False)
        if not stepped:
            process.kill()
        _, errors = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    if not stepped or process.returncode != 0:
        raise RuntimeError(f"the callgrind child failed: {errors[-500:]}")
    return Callgrind.collected(errors)[0] // commands


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size")
    parser.add_argument("--events", type=int, default=300, help="events per game before measuring")
    parser.add_argument("--commands", type=int, default=2000, help="commands per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--callgrind", action="store_true", help="also count instructions per command")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    import uvloop

    events, commands, rounds = args.events, args.commands, args.rounds
    if args.quick:
        events, commands, rounds = 10, 100, 2
    ours, frames = uvloop.run(_ours(events, commands, rounds))
    minimal = _minimal(commands, rounds)
    summary: dict[str, Any] = {
        "events_per_game_before": events,
        "ours_us_per_command": min(ours),
        "minimal_work_us_per_command": min(minimal),
        "ratio_ours_to_minimal_work": ratio(min(ours), min(minimal)),
        "frames_written_per_command": frames / (GAMES * events + commands * rounds),
    }
    sends = frame_send_us(count=2_000 if args.quick else 20_000)
    summary["frame_send_us"] = sends
    summary["signature_us"] = signature_us(200 if args.quick else 2_000)
    if args.callgrind:
        summary["ours_instructions_per_command"] = instructions_per_command(events, min(commands, 1000))
    say(
        f"pipeline at {events} events: ours {min(ours):.1f} us per command (its envelope's signature "
        f"{summary['signature_us']:.1f} us), the minimal pipeline's own work {min(minimal):.1f} us "
        f"({summary['ratio_ours_to_minimal_work']:.1f}x)"
    )
    path = write_result(
        "pipeline",
        {"quick": args.quick, "summary": summary, "runs": {"ours_us": ours, "minimal_work_us": minimal}},
        argv,
    )
    print(f"pipeline: wrote {path}")
    return 0


def _child(events: int, commands: int) -> None:
    import uvloop

    def pause(word: str) -> None:
        # Says where it is and waits while the parent turns counting on or off.
        print(word, flush=True)
        sys.stdin.readline()

    uvloop.run(_ours(events, commands, 1, pause))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        from bench.__main__ import main as bench_main

        raise SystemExit(bench_main(["pipeline", *sys.argv[1:]]))
