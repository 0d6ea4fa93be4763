"""A bulk archive or import on the data dir of a stopped server, its own embedded Redis started for the
run, does not keep the server out: the server started on the data dir during the run comes up within its
usual time (the run hands the directory over between games) and the run goes on through the server's
Redis, every game archived or imported once. Real processes throughout: the server, its embedded
redis-server, the command and its own, slowed by SIGSTOP/SIGCONT so that the run is still going."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestra_client import GameClient
from tests.support.e2e import PERF, expect_accepted, new_game
from tests.support.waiting import until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
GAMES = 48
# What the hand-over may add to a start: the games at hand finished on a Redis stalled as below, then the
# command's Redis stopped; far below the unit's restart budget (deploy/orchestra.service).
HANDOVER_MARGIN = 8.0


def embedded_redis_of(pid: int) -> int | None:
    """The embedded redis-server the process runs (not a short-lived `redis-server --version`), if any."""
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return None
    for child in found:
        try:
            if b"--appendfsync" in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
        except FileNotFoundError:
            continue
    return None


@contextmanager
def stalling(pid: int, stopped: float = 0.15, running: float = 0.01) -> Iterator[None]:
    """The process stopped most of the time (SIGSTOP, a moment of SIGCONT), as one starved of CPU; it is
    left running when it exits meanwhile or when the block ends."""
    done = threading.Event()

    def stall() -> None:
        try:
            while not done.is_set():
                os.kill(pid, signal.SIGSTOP)
                done.wait(stopped)
                os.kill(pid, signal.SIGCONT)
                time.sleep(running)  # the moment it runs: starved, not stopped
        except ProcessLookupError:
            pass

    staller = threading.Thread(target=stall, daemon=True)
    staller.start()
    try:
        yield
    finally:
        done.set()
        staller.join()
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}


def run_with_server_started_midway(
    args: list[str], start: Callable[[], Any]
) -> tuple[subprocess.CompletedProcess[str], Any, float]:
    """Run the command; once its own Redis runs and a game is done, start the server; the command's result,
    the server and the seconds its start took."""
    process = subprocess.Popen(
        [sys.executable, "-m", "server.ops.cli", *args],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def redis_of_its_own() -> int | None:
            assert process.poll() is None, process.communicate()
            return embedded_redis_of(process.pid)

        own = until_sync(redis_of_its_own, 30, "the command's own redis-server")
        assert own is not None
        assert process.stderr is not None
        lines: list[str] = []
        with stalling(own):
            while not any(line.startswith("[") for line in lines):
                line = process.stderr.readline()
                assert line, "".join(lines)
                lines.append(line)
            began = time.monotonic()
            server = start()
            took = time.monotonic() - began
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    return (
        subprocess.CompletedProcess(process.args, process.returncode, out, "".join(lines) + err),
        server,
        took,
    )


async def ended_game(url: str) -> str:
    game_id, tokens = await new_game(url, ["Ada"])
    async with await GameClient.connect(url, game_id, tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
        expect_accepted(await ada.end_game())
    return game_id


async def test_a_server_started_during_a_bulk_run_on_its_data_dir_comes_up_in_its_usual_time(
    start_server: Callable[..., Any], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    folder = tmp_path / "archive"

    def start() -> Any:
        return start_server(redis_url=None, data_dir=data_dir)

    server = start()
    ended = {await ended_game(server.url) for _ in range(GAMES)}
    assert await asyncio.to_thread(server.terminate) in (0, -15)
    began = time.monotonic()
    server = await asyncio.to_thread(start)  # the usual start: its Redis reads the games back
    usual = time.monotonic() - began
    assert await asyncio.to_thread(server.terminate) in (0, -15)

    archive = ["archive", "--all-ended", "--out-dir", str(folder), "--data-dir", str(data_dir)]
    done, server, took = await asyncio.to_thread(run_with_server_started_midway, archive, start)
    assert took < usual + HANDOVER_MARGIN, f"the server took {took:.1f} s to start, usually {usual:.1f} s"
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"a server is starting on {data_dir}: handing the data dir over to it" in done.stderr
    assert "going on through the server's Redis" in done.stderr
    assert f"archive: {GAMES} archived, 0 skipped, 0 failed, of {GAMES}" in done.stdout
    assert {path.stem for path in folder.glob("*.ndjson")} == ended
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert (await http.get("/games")).json() == []
        assert (await http.get(f"/games/{next(iter(ended))}")).status_code == 404
    assert await asyncio.to_thread(server.terminate) in (0, -15)

    imported = ["import", str(folder), "--data-dir", str(data_dir)]
    done, server, took = await asyncio.to_thread(run_with_server_started_midway, imported, start)
    assert took < usual + HANDOVER_MARGIN, f"the server took {took:.1f} s to start, usually {usual:.1f} s"
    assert done.returncode == 0, done.stdout + done.stderr
    assert "handing the data dir over to it" in done.stderr
    assert f"import: {GAMES} imported, 0 skipped, 0 failed, of {GAMES}" in done.stdout
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert {game["game_id"] for game in (await http.get("/games")).json()} == ended
