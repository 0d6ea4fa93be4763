"""Fuzz the websocket protocol: random and mutated frames over several connections, bounded in time.

    python -m bench.fuzz                                # 100,000 frames, at most 600 s
    python -m bench.fuzz --frames 3000 --seconds 60     # the CI size

It starts its own redis-server and `orchestra serve` on free loopback ports (no per-connection rate
limit, so every frame reaches the parser), proves that the server's log is captured (a malformed HTTP
request must show up as uvicorn's "Invalid HTTP request received." warning), then sends `--frames` frames
over `--connections` sessions (players of several games and spectators, each following the view in
one of the hello's ways: the default (no `view`), delta, full, `true` (v1's full), none). Frames are
valid commands and mutations of them: bit flips, truncation, field swaps, type changes, huge values, deep
nesting, random unicode (lone surrogates among them), extra and missing fields, duplicate keys, binary
frames and random bytes. Meanwhile a canary player of another game sends a valid command every half second.

Checked and reported: every frame gets exactly one answer (`accepted` or `rejected`) unless its session
is closed (closes counted by code), the answers by code, the server stays up and keeps answering the
canary (its round trips), no error line or traceback in the server's log, and the server's RSS over the
run and for `--settle` seconds after it (memory must level off: the slope over the second half).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import websockets
from websockets.exceptions import ConnectionClosed

from bench.common import RedisServer, ServerProcess, percentiles, raise_nofile
from bench.soak import log_problems, slope_mib_per_minute
from domain import STANDARD
from orchestra_client import GameClient, create_game
from orchestra_client.bots import random_placement

WINDOW = 16  # frames in flight per connection
ANSWER_TIMEOUT = 15.0
# A hello's `view`, each way (None: no `view`, the default).
HELLO_VIEWS: tuple[str | bool | None, ...] = (None, "delta", "full", True, False)
LOG_CANARY = "Invalid HTTP request received"
_UNICODE = ["\u0000", "\ud800", "\udfff", "\u202e", "\ufeff", "\U0001f3bb", "é", "\u0301", "\uffff", "Ω"]


class Mutator:
    """Produces fuzz frames (str for text frames, bytes for binary ones) from a seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0
        self.kinds: Counter[str] = Counter()

    def valid(self) -> dict[str, Any]:
        rng = self.rng
        self.count += 1
        pick = rng.random()
        if pick < 0.9:
            frame: dict[str, Any] = {
                "type": "place",
                "id": f"f{self.count}",
                **random_placement(STANDARD, rng),
            }
            if rng.random() < 0.2:
                frame["expected_version"] = rng.randint(0, 50)
            return frame
        if pick < 0.97:
            hello: dict[str, Any] = {"type": "hello", "token": None, "since": rng.choice([None, 0, 5])}
            view = rng.choice(HELLO_VIEWS)
            if view is not None:
                hello["view"] = view
            return hello
        return {"type": "end_game", "id": f"f{self.count}"}

    def frame(self) -> str | bytes:
        """The next frame to send."""
        rng = self.rng
        base = self.valid()
        mutations: list[Callable[[dict[str, Any]], dict[str, Any] | str | bytes]] = [
            self.unchanged,
            self.bit_flip,
            self.truncate,
            self.swap_fields,
            self.change_type,
            self.huge_value,
            self.deep_nesting,
            self.random_unicode,
            self.extra_or_missing_field,
            self.duplicate_key,
            self.random_bytes,
            self.as_binary,
        ]
        mutation = rng.choice(mutations)
        self.kinds[mutation.__name__] += 1
        data = mutation(base)
        if rng.random() < 0.15 and mutation is not self.random_bytes:  # a second mutation on top
            data = self.bit_flip(data)
        return _as_frame(data)

    # mutations: each takes a valid frame and returns a frame (dict, str or bytes) --------------------

    def unchanged(self, frame: dict[str, Any]) -> dict[str, Any]:
        return frame

    def bit_flip(self, frame: dict[str, Any] | str | bytes) -> bytes:
        data = bytearray(_encode(frame))
        if not data:
            return b"{"
        for _ in range(self.rng.randint(1, 4)):
            index = self.rng.randrange(len(data))
            data[index] ^= 1 << self.rng.randrange(8)
        return bytes(data)

    def truncate(self, frame: dict[str, Any]) -> bytes:
        data = _encode(frame)
        return data[: self.rng.randrange(len(data))]

    def swap_fields(self, frame: dict[str, Any]) -> dict[str, Any]:
        keys = list(frame)
        if len(keys) >= 2:
            a, b = self.rng.sample(keys, 2)
            frame[a], frame[b] = frame[b], frame[a]
        return frame

    def _other_value(self) -> Any:
        rng = self.rng
        return rng.choice(
            [
                None,
                True,
                0,
                -1,
                rng.randint(-(2**70), 2**70),
                1.5,
                float("1e308"),
                "",
                "x" * rng.randint(1, 100),
                [],
                [1, "a", None],
                {},
                {"kind": "performance"},
                {"type": "place"},
            ]
        )

    def change_type(self, frame: dict[str, Any]) -> dict[str, Any]:
        key = self.rng.choice(list(frame))
        frame[key] = self._other_value()
        if isinstance(frame.get("token"), dict) and frame["token"] and self.rng.random() < 0.5:
            inner = frame["token"]
            inner[self.rng.choice(list(inner))] = self._other_value()
        return frame

    def huge_value(self, frame: dict[str, Any]) -> str | dict[str, Any]:
        rng = self.rng
        key = rng.choice(list(frame))
        choice = rng.randrange(5)
        if choice == 0:  # an integer far beyond 64 bits, as raw JSON text
            text = json.dumps({**frame, key: 0})
            return text.replace(f'"{key}": 0', f'"{key}": {"9" * rng.randint(20, 5000)}', 1)
        if choice == 1:
            frame[key] = "z" * rng.choice([100, 10_000, 16_300, 17_000, 40_000])
        elif choice == 2:
            frame[key] = list(range(rng.choice([100, 3_000, 10_000])))
        elif choice == 3:
            frame[key] = {f"k{i}": i for i in range(rng.choice([10, 1_000, 3_000]))}
        else:
            frame[key] = rng.choice([2**63, -(2**63) - 1, 1e300, -0.0])
        return frame

    def deep_nesting(self, frame: dict[str, Any]) -> str:
        depth = self.rng.choice([10, 100, 500, 1_000, 5_000, 20_000])
        key = self.rng.choice([*frame, "extra"])
        opener, closer = self.rng.choice([("[", "]"), ('{"a":', "}")])
        nested = opener * depth + "1" + closer * depth
        if self.rng.random() < 0.3:
            return nested  # the whole frame
        text = json.dumps({**frame, key: 0})
        return text.replace(f'"{key}": 0', f'"{key}": {nested}', 1)

    def random_unicode(self, frame: dict[str, Any]) -> str:
        rng = self.rng
        key = rng.choice(list(frame))
        pieces = [
            rng.choice(_UNICODE) if rng.random() < 0.5 else chr(rng.randint(0x20, 0x2FFFF)) for _ in range(40)
        ]
        value = "".join(pieces)
        if rng.random() < 0.5:
            frame[key] = value
            # ensure_ascii keeps lone surrogates as \\ud800 escapes: valid JSON text, odd strings inside.
            return json.dumps(frame, ensure_ascii=True)
        frame[value] = key
        return json.dumps(frame, ensure_ascii=rng.random() < 0.5)

    def extra_or_missing_field(self, frame: dict[str, Any]) -> dict[str, Any]:
        if self.rng.random() < 0.5 and len(frame) > 1:
            del frame[self.rng.choice(list(frame))]
        else:
            frame[self.rng.choice(["seat", "game_id", "token2", "id", "type", "__proto__"])] = (
                self._other_value()
            )
        return frame

    def duplicate_key(self, frame: dict[str, Any]) -> str:
        key = self.rng.choice(list(frame))
        text = json.dumps(frame)
        return text[:-1] + f', "{key}": {json.dumps(self._other_value())}' + "}"

    def random_bytes(self, frame: dict[str, Any]) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, 300))

    def as_binary(self, frame: dict[str, Any]) -> bytes:
        return b"\x00BIN" + _encode(frame)


def _encode(frame: dict[str, Any] | str | bytes) -> bytes:
    if isinstance(frame, bytes):
        return frame
    if isinstance(frame, str):
        return frame.encode("utf-8", "surrogatepass")
    return json.dumps(frame).encode()


def _as_frame(data: dict[str, Any] | str | bytes) -> str | bytes:
    """Text when the bytes are valid UTF-8 (binary frames are kept binary), else a binary frame."""
    if isinstance(data, dict):
        return json.dumps(data)
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return data.encode("utf-8", "surrogatepass")  # not valid UTF-8: it can only go as binary
        return data
    if data.startswith(b"\x00BIN"):
        return data[4:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


@dataclass
class Stats:
    """What the fuzz connections saw."""

    sent: int = 0
    answered: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    closes: Counter[str] = field(default_factory=Counter)
    close_details: list[dict[str, Any]] = field(default_factory=list)
    unanswered: int = 0  # frames whose session ended (closed by the server) before their answer
    stalls: int = 0  # an answer that did not come within ANSWER_TIMEOUT on an open session
    extra_answers: int = 0
    events_frames: int = 0
    sessions: int = 0


async def _session(
    url: str, token: str | None, gen: Mutator, stats: Stats, quota: list[int], deadline: float
) -> None:
    """One connection: hello, then frames with WINDOW in flight, until the shared quota is spent."""
    ws = await websockets.connect(url, max_size=None, open_timeout=10, close_timeout=2)
    stats.sessions += 1
    try:
        # Each way of following a game's view, so that the fuzzed games' frames go out in all of them.
        hello: dict[str, Any] = {"type": "hello", "token": token, "since": None}
        view = gen.rng.choice(HELLO_VIEWS)
        if view is not None:
            hello["view"] = view
        await ws.send(json.dumps(hello))
        welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if welcome.get("type") != "welcome":
            raise RuntimeError(f"no welcome: {welcome}")
        window = asyncio.Semaphore(WINDOW)
        counts = {"sent": 0, "answered": 0}
        recent: deque[int] = deque(maxlen=WINDOW)

        async def reader() -> None:
            try:
                await read()
            finally:  # the session ended: wake the sender
                for _ in range(WINDOW):
                    window.release()

        async def read() -> None:
            async for message in ws:
                frame = json.loads(message)
                if frame.get("type") in ("accepted", "rejected"):
                    counts["answered"] += 1
                    stats.codes[frame.get("code", "accepted")] += 1
                    if counts["answered"] > counts["sent"]:
                        stats.extra_answers += 1
                    window.release()
                elif frame.get("type") == "events":
                    stats.events_frames += 1

        reading = asyncio.get_running_loop().create_task(reader())
        try:
            while quota[0] > 0 and time.monotonic() < deadline and not reading.done():
                try:
                    await asyncio.wait_for(window.acquire(), ANSWER_TIMEOUT)
                except TimeoutError:
                    stats.stalls += 1
                    break
                if reading.done():
                    break
                quota[0] -= 1
                counts["sent"] += 1
                stats.sent += 1
                frame = gen.frame()
                recent.append(len(frame))
                await ws.send(frame)
            drain_until = time.monotonic() + ANSWER_TIMEOUT
            while counts["answered"] < counts["sent"] and not reading.done():
                if time.monotonic() > drain_until:
                    stats.stalls += 1
                    break
                await asyncio.sleep(0.01)
        except ConnectionClosed:
            pass
        finally:
            if reading.done():  # the server ended the session: note its close code and what preceded it
                stats.closes[str(ws.close_code)] += 1
                if len(stats.close_details) < 30:
                    stats.close_details.append(
                        {"code": ws.close_code, "largest_recent_frame": max(recent, default=0)}
                    )
            await ws.close()
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
        stats.answered += counts["answered"]
        stats.unanswered += max(0, counts["sent"] - counts["answered"])
    finally:
        await ws.close()


async def _connection(
    url: str, token: str | None, seed: int, stats: Stats, quota: list[int], deadline: float
) -> Mutator:
    gen = Mutator(seed)
    while quota[0] > 0 and time.monotonic() < deadline:
        try:
            await _session(url, token, gen, stats, quota, deadline)
        except (OSError, ConnectionClosed, TimeoutError) as exc:
            stats.closes[f"error:{type(exc).__name__}"] += 1
            await asyncio.sleep(0.1)
    return gen


async def _canary(base_url: str, stop: asyncio.Event, latencies: list[float], failures: list[str]) -> None:
    created = await create_game(base_url, ["Canary"])
    rng = random.Random(99)
    async with await GameClient.connect(base_url, created["game_id"], created["seats"][0]["token"]) as client:
        while not stop.is_set():
            frame = random_placement(STANDARD, rng)
            began = time.monotonic()
            try:
                answer = await client.place(frame.pop("token"), frame.pop("space"), **frame)
            except Exception as exc:  # a canary records every failure and goes on
                failures.append(f"{type(exc).__name__}: {exc}")
            else:
                latencies.append(time.monotonic() - began)
                if answer["type"] != "accepted":
                    failures.append(f"canary rejected: {answer}")
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass


async def _memory(pid: int, started: float, samples: list[tuple[float, int]], every: float = 0.5) -> None:
    process = psutil.Process(pid)
    while True:
        samples.append((time.monotonic() - started, process.memory_info().rss))
        await asyncio.sleep(every)


def prove_log_capture(host_port: tuple[str, int], server: ServerProcess, timeout: float = 10.0) -> bool:
    """Send a malformed HTTP request; True once uvicorn's warning about it is in the captured log."""
    with socket.create_connection(host_port, timeout=5) as raw:
        raw.sendall(b"NOT HTTP AT ALL\r\n\r\n\x00\x01\x02\r\n\r\n")
        try:
            raw.recv(1024)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if LOG_CANARY in server.log_path.read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False


async def run(args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    """Fuzz the server at `server.url`; the figures."""
    base = server.url
    ws_base = base.replace("http://", "ws://")
    started = time.monotonic()
    samples: list[tuple[float, int]] = []
    memory = asyncio.get_running_loop().create_task(_memory(server.pid, started, samples))
    stop = asyncio.Event()
    canary_latencies: list[float] = []
    canary_failures: list[str] = []
    canary: asyncio.Task[None] = asyncio.get_running_loop().create_task(
        _canary(base, stop, canary_latencies, canary_failures)
    )
    sessions: list[tuple[str, str | None]] = []
    for _ in range(max(1, args.connections // 3)):
        created = await create_game(base, ["A", "B"])
        url = f"{ws_base}/games/{created['game_id']}/ws"
        sessions += [(url, seat["token"]) for seat in created["seats"]] + [(url, None)]
    sessions = sessions[: args.connections]
    stats, quota = Stats(), [args.frames]
    deadline = started + args.seconds
    fuzz_began = time.monotonic()
    mutators = await asyncio.gather(
        *(
            _connection(url, token, args.seed * 1000 + i, stats, quota, deadline)
            for i, (url, token) in enumerate(sessions)
        )
    )
    fuzz_seconds = time.monotonic() - fuzz_began
    fuzz_end = time.monotonic() - started
    await asyncio.sleep(args.settle)  # the canary and the memory sampler go on while the server settles
    stop.set()
    await canary
    memory.cancel()
    await asyncio.gather(memory, return_exceptions=True)
    kinds: Counter[str] = Counter()
    for gen in mutators:
        kinds.update(gen.kinds)
    during = [(t, m) for t, m in samples if t <= fuzz_end]
    second_half = [(t, m) for t, m in during if t >= fuzz_end / 2]
    settle = [(t, m) for t, m in samples if t > fuzz_end]
    mib = 2**20
    return {
        "frames_sent": stats.sent,
        "frames_answered": stats.answered,
        "frames_unanswered_on_closed_sessions": stats.unanswered,
        "stalls": stats.stalls,
        "extra_answers": stats.extra_answers,
        "sessions": stats.sessions,
        "closes": dict(stats.closes),
        "close_details": stats.close_details,
        "answers_by_code": dict(stats.codes.most_common()),
        "events_frames": stats.events_frames,
        "mutations": dict(kinds.most_common()),
        "fuzz_seconds": round(fuzz_seconds, 2),
        "frames_per_second": round(stats.sent / fuzz_seconds, 1) if fuzz_seconds else 0.0,
        "canary": {
            "commands": len(canary_latencies),
            "failures": canary_failures[:10],
            "latency_ms": {k: round(v, 2) for k, v in percentiles(canary_latencies).items()},
        },
        "rss_mib": {
            "before": round(samples[0][1] / mib, 1),
            "peak": round(max(m for _, m in samples) / mib, 1),
            "end_of_fuzz": round(during[-1][1] / mib, 1) if during else None,
            "after_settle": round(samples[-1][1] / mib, 1),
            "by_tenth_of_the_run": [
                round(during[int(i * (len(during) - 1) / 10)][1] / mib, 1) for i in range(11)
            ]
            if during
            else [],
            "slope_second_half_mib_per_min": round(slope_mib_per_minute(second_half), 3),
            "slope_settle_mib_per_min": round(slope_mib_per_minute(settle), 3),
        },
    }


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.split("\n\n")[0])
    cli.add_argument("--frames", type=int, default=100_000, help="frames to send in all (default 100,000)")
    cli.add_argument("--seconds", type=float, default=600.0, help="stop sending after this many seconds")
    cli.add_argument("--connections", type=int, default=9, help="fuzzing sessions at once (default 9)")
    cli.add_argument("--settle", type=float, default=10.0, help="seconds to watch memory after the fuzz")
    cli.add_argument("--seed", type=int, default=1)
    cli.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    return cli


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    raise_nofile()
    with RedisServer() as redis_server, ServerProcess("ours", redis_server.url) as server:
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        log_captured = prove_log_capture((host, int(port)), server)
        report = asyncio.run(run(args, server))
        report["server_alive"] = server.process.poll() is None
        server.stop()
        text = server.log_path.read_text(errors="replace")
    report["log_capture_proved"] = log_captured
    report["log_problems"] = log_problems(text)[:20]
    report["log_warnings"] = dict(
        Counter(
            json.loads(line).get("msg", "?")
            for line in text.splitlines()
            if line.startswith("{") and '"level":"warning"' in line
        )
    )
    report["command"] = "python -m bench.fuzz " + " ".join(argv if argv is not None else sys.argv[1:])
    out = json.dumps(report, indent=2)
    if args.out is not None:
        args.out.write_text(out + "\n")
    print(out)
    ok = (
        report["server_alive"]
        and log_captured
        and not report["log_problems"]
        and not report["canary"]["failures"]
        and report["canary"]["commands"] > 0
        and report["stalls"] == 0
        and report["extra_answers"] == 0
        and report["frames_sent"] >= args.frames
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
