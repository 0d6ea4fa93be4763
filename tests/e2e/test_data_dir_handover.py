"""A bulk archive or import on the data dir of a stopped server, its own embedded Redis started for the
run, does not keep the server out: the server started on the data dir during the run comes up within its
usual time (the run hands the directory over between games) and the run goes on through the server's
Redis, every game archived or imported once. Real processes throughout: the server, its embedded
redis-server, the command and its own. The run is under way when the server starts by construction: the
command is stopped as it starts its Redis (the directory held, no game done), let go once the server has
asked for the directory, and its Redis starved by SIGSTOP/SIGCONT while the server comes up."""

from __future__ import annotations

import asyncio
import functools
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestra_client import GameClient
from server.ops.embedded_redis import WANTED_NAME
from server.ops.redis_binary import find
from tests.support.e2e import PERF, expect_accepted, new_game
from tests.support.waiting import until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
GAMES = 48
# What the hand-over may add to a start: the games at hand finished on a Redis stalled as below, then the
# command's Redis stopped; far below the unit's restart budget (deploy/orchestra.service).
HANDOVER_MARGIN = 8.0


def embedded_redis_of(pid: int) -> int | None:
    """The embedded redis-server the process runs (not a short-lived `redis-server --version`), if any.
    By its name: a running redis-server writes its own title over its arguments."""
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return None
    for child in found:
        try:
            name = Path(f"/proc/{child}/comm").read_text().strip()
            arguments = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if name == "redis-server" and b"--version" not in arguments:
            return int(child)
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


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP), by /proc/PID/stat's state."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def stopping_redis_server(folder: Path) -> Path:
    """A folder holding a `redis-server` that stops its parent (the command) as it starts, then runs the
    redis-server the command would have run; `--version` it answers at once, as that one. First on the
    command's PATH, it is the one the command chooses (equal versions: the first on PATH)."""
    folder.mkdir()
    script = folder / "redis-server"
    real = shlex.quote(find().path)
    script.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && exec {real} --version\nkill -STOP "$PPID"\nexec {real} "$@"\n'
    )
    script.chmod(0o755)
    return folder


def env(path_first: Path) -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    found["PATH"] = f"{path_first}{os.pathsep}{found.get('PATH', '')}"
    return found


def run_with_server_started_midway(
    args: list[str], start: Callable[[], Any], data_dir: Path, wrapper: Path
) -> tuple[subprocess.CompletedProcess[str], Any, float]:
    """Run the command; once it holds the data dir and starts its own Redis (where `wrapper`'s
    redis-server stops it), start the server; once the server has asked for the directory, let the
    command go on, its Redis starved. The command's result, the server and the seconds its start took."""
    process = subprocess.Popen(
        [sys.executable, "-m", "server.ops.cli", *args],
        cwd=ROOT,
        env=env(wrapper),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def held() -> bool:
            assert process.poll() is None, process.communicate()
            return stopped(process.pid)

        # Stopped by its redis-server as it starts: the command holds the directory and has done nothing.
        until_sync(held, 30, "the command stopped as its redis-server starts")
        own = embedded_redis_of(process.pid)
        assert own is not None
        with ThreadPoolExecutor(1) as pool:
            began = time.monotonic()
            starting = pool.submit(start)
            until_sync(lambda: (data_dir / WANTED_NAME).exists(), 30, "the server asking for the data dir")
            with stalling(own):
                os.kill(process.pid, signal.SIGCONT)
                server = starting.result(timeout=60)
                took = time.monotonic() - began
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
            process.wait(10)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), server, took


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
    wrapper = stopping_redis_server(tmp_path / "bin")

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
    midway = functools.partial(run_with_server_started_midway, data_dir=data_dir, wrapper=wrapper)
    done, server, took = await asyncio.to_thread(midway, archive, start)
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
    done, server, took = await asyncio.to_thread(midway, imported, start)
    assert took < usual + HANDOVER_MARGIN, f"the server took {took:.1f} s to start, usually {usual:.1f} s"
    assert done.returncode == 0, done.stdout + done.stderr
    assert "handing the data dir over to it" in done.stderr
    assert f"import: {GAMES} imported, 0 skipped, 0 failed, of {GAMES}" in done.stdout
    async with httpx.AsyncClient(base_url=server.url) as http:
        assert {game["game_id"] for game in (await http.get("/games")).json()} == ended
