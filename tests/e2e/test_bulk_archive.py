"""Bulk `orchestra archive --all-ended/--ended-before --out-dir`, `import` and `verify --file` of a folder,
each on a Redis of its own: progress lines when stderr is not a terminal, a summary, exit codes, and a run
stopped midway (Ctrl-C, or a process killed between a file and its delete) that the same command
completes without losing or doubling a game. The faults are real: a Redis stopped and continued
(SIGSTOP, SIGCONT), a run killed (SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
import redis

from orchestra_client import GameClient
from server.ops.bulk import AT_ONCE
from tests.support.e2e import PERF, expect_accepted, new_game
from tests.support.redis import RedisProcess
from tests.support.waiting import until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "server.ops.cli", *args]


def child_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env.update({f"ORCHESTRA_{name.upper()}": value for name, value in settings.items()})
    return env


async def cli(*args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        command(*args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(**settings),
    )


class Deployment:
    """A server on a Redis of its own, and the options that reach both from the command line."""

    def __init__(self, redis_process: RedisProcess, server: Any) -> None:
        self.redis, self.server = redis_process, server
        self.options = ("--redis-url", redis_process.url, "--data-dir", str(server.directory / "var"))

    def games(self) -> set[str]:
        client = redis.Redis.from_url(self.redis.url)
        try:
            return {
                game_id.decode() for game_id in cast(list[bytes], client.zrange("orchestra:games", 0, -1))
            }
        finally:
            client.close()

    def stored(self) -> set[str]:
        """The games listed whose stream is still there (an archive stopped within its delete may leave
        an entry in the list for a game whose stream is gone)."""
        client = redis.Redis.from_url(self.redis.url)
        try:
            return {game_id for game_id in self.games() if client.exists(f"orchestra:{{{game_id}}}:events")}
        finally:
            client.close()

    def fenced(self, game_id: str) -> bool:
        client = redis.Redis.from_url(self.redis.url)
        try:
            return bool(client.hexists(f"orchestra:{{{game_id}}}:commands", "!fenced"))
        finally:
            client.close()

    async def ended_games(self, count: int) -> list[str]:
        async def one() -> str:
            game_id, tokens = await new_game(self.server.url, ["Ada"])
            assert isinstance(game_id, str)
            async with await GameClient.connect(self.server.url, game_id, tokens[0], reconnect=False) as ada:
                expect_accepted(await ada.place(PERF, "viola"))
                expect_accepted(await ada.end_game())
            return game_id

        made: list[str] = []
        for start in range(0, count, 10):
            made += list(await asyncio.gather(*(one() for _ in range(min(10, count - start)))))
        return made


@pytest.fixture
def deployment(start_server: Callable[..., Any], tmp_path: Path) -> Iterator[Deployment]:
    own = RedisProcess(tmp_path / "redis").start()
    try:
        yield Deployment(own, start_server(redis_url=own.url))
    finally:
        own.stop()


def files(folder: Path) -> set[str]:
    return {path.stem for path in folder.glob("*.ndjson")}


def tamper(redis_url: str, game_id: str, version: int) -> None:
    """Change one stored envelope's event in place: its signature no longer holds."""
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"orchestra:{{{game_id}}}:events"
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(key))
        client.delete(key)
        for entry_id, fields in entries:
            data = fields[b"e"]
            if entry_id == f"0-{version}".encode():
                raw = msgspec.json.decode(data)
                raw["event"]["space"] = "timpani"
                data = msgspec.json.encode(raw)
            client.xadd(key, {"e": data}, id=entry_id)
    finally:
        client.close()


async def test_bulk_archive_shows_progress_lines_a_summary_and_says_by_its_exit_code_what_failed(
    deployment: Deployment, tmp_path: Path
) -> None:
    ended = await deployment.ended_games(6)
    playing, _ = await new_game(deployment.server.url, ["Ada"])
    damaged = (await deployment.ended_games(1))[0]
    tamper(deployment.redis.url, damaged, 2)
    folder = tmp_path / "archive"

    none = await cli("archive", "--ended-before", "2000-01-01", "--out-dir", str(folder), *deployment.options)
    assert none.returncode == 0, none.stdout + none.stderr
    assert "archive: 0 archived, 0 skipped, 0 failed, of 0" in none.stdout

    run = await cli("archive", "--all-ended", "--out-dir", str(folder), *deployment.options)
    assert run.returncode == 1, run.stdout + run.stderr
    progress = run.stderr.splitlines()
    assert len(progress) == 7 and "\r" not in run.stderr  # not a terminal: one plain line a game
    assert [line.split("]")[0] for line in progress] == [f"[{n}/7" for n in range(1, 8)]
    assert sum(": archived: 3 envelopes, " in line for line in progress) == 6
    assert sum(f"] {damaged}: not archived: " in line for line in progress) == 1
    assert f"{damaged}: not archived: " in run.stdout and "does not verify at version 2" in run.stdout
    assert run.stdout.splitlines()[-1].startswith("archive: 6 archived, 0 skipped, 1 failed, of 7 in ")

    assert files(folder) == set(ended)
    assert not list(folder.glob(".*"))  # no partial file left
    assert deployment.games() == {playing, damaged}
    assert not deployment.fenced(damaged)  # a failed archive lifts its fence

    later = await cli(
        "archive", "--ended-before", "2999-12-31T00:00:00Z", "--out-dir", str(folder), *deployment.options
    )
    assert later.returncode == 1 and "archive: 0 archived, 0 skipped, 1 failed, of 1" in later.stdout

    checked = await cli("verify", "--file", str(folder), *deployment.options[2:])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "verify: 6 verified, 0 skipped, 0 failed, of 6" in checked.stdout
    assert len(checked.stderr.splitlines()) == 6

    back = await cli("import", str(folder), *deployment.options)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "import: 6 imported, 0 skipped, 0 failed, of 6" in back.stdout
    assert deployment.games() == {playing, damaged, *ended}
    again = await cli("import", str(folder), *deployment.options)
    assert again.returncode == 0 and "import: 0 imported, 6 skipped, 0 failed, of 6" in again.stdout

    usage = await cli("archive", "--all-ended", *deployment.options)
    assert usage.returncode == 2 and "--out-dir" in usage.stderr


@contextlib.contextmanager
def stalling(redis_process: RedisProcess, stopped: float = 0.05, running: float = 0.005) -> Iterator[None]:
    """Redis stalled most of the time (SIGSTOP, then SIGCONT for a moment), as a Redis starved of CPU or
    swapped out: a bulk run goes slowly enough to be stopped midway, however fast the machine. Each stall
    is far below the store's command timeout, so nothing fails for it."""
    assert redis_process.process is not None
    pid = redis_process.process.pid
    done = threading.Event()

    def stall() -> None:
        while not done.is_set():
            os.kill(pid, signal.SIGSTOP)
            done.wait(stopped)
            os.kill(pid, signal.SIGCONT)
            time.sleep(running)  # the moment it runs: starved, not stopped

    staller = threading.Thread(target=stall, daemon=True)
    staller.start()
    try:
        yield
    finally:
        done.set()
        staller.join()
        os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """A process stopped (SIGSTOP) for the block, continued after it whatever happens."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


# Its Redis is stalled and stopped on purpose: the node serving the games may say it cannot share presence.
@pytest.mark.logs_warnings
async def test_a_bulk_archive_stopped_by_ctrl_c_resumes_without_losing_or_doubling_a_game(
    deployment: Deployment, tmp_path: Path
) -> None:
    ended = set(await deployment.ended_games(40))
    folder = tmp_path / "archive"
    assert deployment.redis.process is not None
    redis_pid = deployment.redis.process.pid

    def interrupted_run(presses: int) -> tuple[int, str, list[str]]:
        process = subprocess.Popen(
            command("archive", "--all-ended", "--out-dir", str(folder), *deployment.options),
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        lines: list[str] = []
        with stalling(deployment.redis):  # a slow Redis: the run is still going after three games
            # Three games' lines, not any three lines: a line the command logs before its run (a slow
            # store on a loaded machine) would let the press land before the run listens for it.
            while sum(line.startswith("[") for line in lines) < 3:
                line = process.stderr.readline()
                assert line, "".join(lines)  # the run ended before three games
                lines.append(line)
        # Redis stopped while the keys are pressed: the games at hand cannot finish before the press lands.
        with stopped(redis_pid):
            process.send_signal(signal.SIGINT)
            lines.append(process.stderr.readline())  # the first press is acknowledged
            if presses == 2:
                process.send_signal(signal.SIGINT)
        # Not communicate(): it reads the pipes' descriptors, and the lines stderr's reader has buffered
        # (the press's acknowledgement among them) would be lost. The output is far below a pipe's size.
        process.wait(timeout=60)
        assert process.stdout is not None
        with process.stdout, process.stderr:
            out, rest = process.stdout.read(), process.stderr.read()
        return process.returncode, out, lines + rest.splitlines()

    code, out, progress = await asyncio.to_thread(interrupted_run, 1)
    assert code == 130, out + "\n".join(progress)
    assert any("Ctrl-C: stopping once the games at hand are done" in line for line in progress), (
        out + "\n".join(progress)
    )
    assert "interrupted with" in out and "run the same command again to resume" in out
    archived, left = files(folder), deployment.games()
    assert 3 <= len(archived) < 40
    assert archived | left == ended and not archived & left  # each game in one place: file or store
    assert not any(deployment.fenced(game_id) for game_id in left)

    # Ctrl-C twice stops at once: a game at hand may be left with its file written and not yet deleted
    # (never deleted without its file), which the next run completes.
    code, out, progress = await asyncio.to_thread(interrupted_run, 2)
    assert code == 130, out + "\n".join(progress)
    archived, left = files(folder), deployment.stored()
    assert archived | left == ended and len(archived & left) <= AT_ONCE
    assert not any(deployment.fenced(game_id) for game_id in left)

    resumed = await cli("archive", "--all-ended", "--out-dir", str(folder), *deployment.options)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"archive: {len(left)} archived, 0 skipped, 0 failed, of {len(left)}" in resumed.stdout
    assert files(folder) == ended and deployment.games() == set()
    checked = await cli("verify", "--file", str(folder), *deployment.options[2:])
    assert checked.returncode == 0 and "verify: 40 verified, 0 skipped, 0 failed, of 40" in checked.stdout


async def test_a_bulk_archive_killed_between_a_file_and_its_delete_is_completed_by_the_next_run(
    deployment: Deployment, tmp_path: Path
) -> None:
    ended = set(await deployment.ended_games(30))
    folder = tmp_path / "archive"
    assert deployment.redis.process is not None
    redis_pid = deployment.redis.process.pid

    def killed_run(before: set[str]) -> int:
        process = subprocess.Popen(
            command("archive", "--all-ended", "--out-dir", str(folder), *deployment.options),
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with stalling(deployment.redis):

                def writing() -> bool:  # a game's file is being written (or the run is over)
                    return process.poll() is not None or bool(list(folder.glob(".*.part")))

                # A file is being written only for as long as its write and fsync take: looked for often.
                until_sync(writing, 60, "a game's file being written", interval=0.001)
                if process.poll() is not None:
                    return process.returncode  # every file written before one was seen mid-write
                os.kill(process.pid, signal.SIGSTOP)
            # Redis stopped, the run continued: the files at hand are written, and their deletes wait on
            # Redis, until the run is killed (SIGKILL: nothing of it runs after).
            with stopped(redis_pid):
                os.kill(process.pid, signal.SIGCONT)

                def written() -> bool:  # the files at hand, each whole: their deletes wait on Redis
                    return bool(files(folder) - before) and not list(folder.glob(".*.part"))

                until_sync(written, 10, "the files at hand written")
                process.kill()
                return process.wait(10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)

    # A delete the run had already sent when Redis stopped still runs once Redis goes on, so a kill may land
    # after every delete of the files at hand (and a run may slip through unseen): then the run is tried
    # again on the games left.
    waiting: set[str] = set()
    for _ in range(6):
        killed = await asyncio.to_thread(killed_run, files(folder))
        # Each game is in a file or still in the store; those with a file and in the store are fenced.
        in_place, left = files(folder), deployment.stored()
        assert in_place and in_place | left == ended
        waiting = in_place & left
        if (killed == -signal.SIGKILL and waiting) or not left:
            break
    assert waiting, "every run was killed after the deletes, not between a file and its delete"
    assert all(deployment.fenced(game_id) for game_id in waiting)

    resumed = await cli("archive", "--all-ended", "--out-dir", str(folder), *deployment.options)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    for game_id in waiting:
        assert f"{game_id}: archived (its verified file was in place): 3 envelopes" in resumed.stderr
    assert f"archive: {len(left)} archived, 0 skipped, 0 failed, of {len(left)}" in resumed.stdout
    assert files(folder) == ended and deployment.games() == set()
    assert not list(folder.glob(".*"))
