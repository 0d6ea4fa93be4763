"""`orchestra serve` and `orchestra demo` on a terminal write a few lines for people; anywhere else, JSON.

Each runs as a real process: once with its stdin, stdout and stderr on a pseudo-terminal (as in a shell),
once with pipes (as under a supervisor), and with `--log-format` / ORCHESTRA_LOG_FORMAT saying otherwise
both ways. A server on the session's Redis with a fresh data dir always warns (its signing key is made for
it alone), which gives each run a warning to show.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from orchestra_client import WallClient
from server.ops.logs import TextFormatter, chosen_format
from tests.support.servers import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

WARNING = "signing key made for this node only"
STARTED = "Orchestra server running at"


class Run:
    """A command of `orchestra`, its output read as it comes; on a terminal, stdout and stderr are one."""

    def __init__(self, args: list[str], env: dict[str, str], terminal: bool, log: Path) -> None:
        command = [sys.executable, "-m", "server.ops.cli", *args]
        self.terminal = terminal
        self.out = ""
        self.log = log
        self._stderr = log.open("wb")
        if terminal:
            self.source, child = os.openpty()
            stdin, stderr = child, child
        else:
            # stdout a pipe; stderr into a file, which nobody needs to read while the server runs.
            self.source, child = os.pipe()
            stdin, stderr = subprocess.DEVNULL, self._stderr.fileno()
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, start_new_session=True, stdin=stdin, stdout=child, stderr=stderr
        )
        os.close(child)

    def read_until(self, text: str, timeout: float = 30.0) -> str:
        """What the command wrote to stdout (on a terminal, stderr too) once `text` is in it."""
        deadline = time.monotonic() + timeout
        source = self.source
        while text not in self.out:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([source], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no {text!r} within {timeout}s: {self.out}{self.err()}")
            try:
                chunk = os.read(source, 65536)
            except OSError:  # EIO: the terminal's other side is closed, the command ended
                chunk = b""
            if not chunk:
                raise AssertionError(f"ended without {text!r}: {self.out}{self.err()}")
            # A terminal ends its lines with \r\n.
            self.out += chunk.decode(errors="replace").replace("\r\n", "\n")
        return self.out

    def interrupt(self) -> None:
        """Ctrl-C, as a person stops it; then what is left is read."""
        self.process.send_signal(signal.SIGINT)
        assert self.finish() == 0, self.out + self.err()

    def finish(self) -> int:
        """Wait for the command to end and read what is left. Returns the exit status."""
        status: int = self.process.wait(30)
        source = self.source
        while select.select([source], [], [], 0.2)[0]:
            try:
                chunk = os.read(source, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.out += chunk.decode(errors="replace").replace("\r\n", "\n")
        return status

    def err(self) -> str:
        """stderr, when it is not the terminal."""
        return "" if self.terminal else self.log.read_text(errors="replace")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        os.close(self.source)
        self._stderr.close()


# orchestra(*args, terminal=..., **settings) -> Run
Start = Callable[..., Run]


@pytest.fixture
def orchestra(redis_url: str, tmp_path: Path) -> Iterator[Start]:
    """`orchestra(*args, terminal=..., **settings)`: a Run on the session's Redis, in a fresh data dir."""
    runs: list[Run] = []

    def start(*args: str, terminal: bool, **settings: str) -> Run:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
        env.update({f"ORCHESTRA_{name.upper()}": value for name, value in settings.items()})
        env.setdefault("ORCHESTRA_REDIS_URL", redis_url)
        env["ORCHESTRA_DATA_DIR"] = str(tmp_path / f"var{len(runs)}")
        env["TERM"] = "dumb"
        run = Run([*args, "--port", "0"], env, terminal, tmp_path / f"stderr{len(runs)}.log")
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.close()


def visit(url: str) -> None:
    """A request and a websocket session, each of which the access log has a line for."""
    assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200

    async def watch_the_wall() -> None:
        wall = await WallClient.connect(url, reconnect=False)
        await wall.close()

    asyncio.run(watch_the_wall())


def json_lines(text: str) -> list[dict[str, object]]:
    """Every non-empty line of `text` as a JSON object; fails on a line that is not one."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_serve_on_a_terminal_prints_its_address_links_and_warnings_in_words(orchestra: Start) -> None:
    run = orchestra("serve", terminal=True)
    out = run.read_until("Press Ctrl-C to stop.")
    url = next(line for line in out.splitlines() if line.startswith(STARTED)).split()[-1].rstrip("/")
    assert f"games:   {url}/" in out and f"wall:    {url}/wall" in out and f"metrics: {url}/metrics" in out
    warning = next(line for line in out.splitlines() if WARNING in line)
    assert " warning: " in warning and "path: " in warning
    visit(url)
    run.interrupt()
    lines = [line for line in run.out.splitlines() if line.strip()]
    assert not [line for line in lines if line.lstrip().startswith("{")], run.out
    # uvicorn's info lines and the server's (started, signing, the access log) stay out: a few lines.
    assert "Started server process" not in run.out and "signing envelopes" not in run.out
    assert "Traceback" not in run.out  # Ctrl-C stops it without one
    # Nor the access log's lines, nor a websocket connection's opening and closing.
    assert "readyz" not in run.out and "session" not in run.out and "connection open" not in run.out
    assert len(lines) <= 8, run.out


def test_serve_into_pipes_logs_json_lines_and_prints_only_its_address(orchestra: Start) -> None:
    run = orchestra("serve", terminal=False)
    out = run.read_until(STARTED)
    visit(out.split()[-1].rstrip("/"))
    run.interrupt()
    assert [line for line in run.out.splitlines() if line.strip()] == [out.strip()]  # no links
    logged = json_lines(run.err())
    assert any(line["level"] == "warning" and WARNING in str(line["msg"]) for line in logged)
    assert any(line["msg"] == "signing envelopes" for line in logged)  # info lines too
    assert any(line["msg"] == "request" and line.get("route") == "/readyz" for line in logged)
    assert any(line["msg"] == "websocket session" for line in logged)


@pytest.mark.parametrize(
    ("terminal", "option", "setting", "expected"),
    [
        pytest.param(True, "json", None, "json", id="terminal-flag-json"),
        pytest.param(True, None, "json", "json", id="terminal-env-json"),
        pytest.param(False, "text", None, "text", id="pipe-flag-text"),
        pytest.param(False, None, "text", "text", id="pipe-env-text"),
        pytest.param(False, "text", "json", "text", id="pipe-flag-wins-over-env"),
    ],
)
def test_the_flag_and_the_setting_choose_the_format_both_ways(
    orchestra: Start,
    terminal: bool,
    option: str | None,
    setting: str | None,
    expected: str,
) -> None:
    args = ["serve", *(["--log-format", option] if option else [])]
    run = orchestra(*args, terminal=terminal, **({"log_format": setting} if setting else {}))
    run.read_until(STARTED)
    run.interrupt()
    logged = [line for line in (run.out + run.err()).splitlines() if line.strip()]
    if expected == "json":
        records = json_lines("\n".join(line for line in logged if not line.startswith(STARTED)))
        assert any(WARNING in str(record["msg"]) for record in records)
        assert "Press Ctrl-C to stop." not in run.out
    else:
        assert not [line for line in logged if line.lstrip().startswith("{")], logged
        assert any(" warning: " in line and WARNING in line for line in logged)


def test_a_server_that_cannot_start_says_why_in_words_on_a_terminal(orchestra: Start) -> None:
    run = orchestra("serve", terminal=True, redis_url="redis://127.0.0.1:1")
    run.read_until("Application startup failed")
    assert run.finish() != 0
    error = next(line for line in run.out.splitlines() if " error: " in line and "127.0.0.1:1" in line)
    assert "Connection refused" in error or "connect" in error.lower()
    assert "Traceback" not in run.out and not [line for line in run.out.splitlines() if line.startswith("{")]


def test_demo_on_a_terminal_prints_its_links_and_no_json(orchestra: Start) -> None:
    args = ["demo", "--pace", "0", "0", "--placements", "1", "--seed", "1", "--exit-when-done"]
    run = orchestra(*args, terminal=True)
    run.read_until("The game is over")
    assert run.finish() == 0
    out = run.out
    for needed in ("Orchestra demo running at http://127.0.0.1:", "  watch:  http://", "  replay: http://"):
        assert needed in out
    assert not [line for line in out.splitlines() if line.lstrip().startswith("{")], out


def test_a_bad_log_format_is_refused_by_name(orchestra: Start) -> None:
    run = orchestra("serve", terminal=False, log_format="xml")
    assert run.finish() == 2
    assert "log_format" in run.err() and "xml" in run.err() and run.out == ""
    flag = subprocess.run(
        [sys.executable, "-m", "server.ops.cli", "serve", "--log-format", "xml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert flag.returncode == 2 and "--log-format" in flag.stderr and "'xml'" in flag.stderr


def test_the_text_format_cuts_tracebacks_and_query_strings() -> None:
    record = logging.LogRecord(
        "uvicorn.error",
        logging.ERROR,
        __file__,
        1,
        'Traceback (most recent call last):\n  File "x.py", line 1\nOSError: no route to /x?token=s3cret',
        None,
        None,
    )
    line = TextFormatter().format(record)
    assert line.endswith("error: OSError: no route to /x?[query omitted]") and "s3cret" not in line
    try:
        raise ValueError("bad\nworse")
    except ValueError:
        record = logging.LogRecord("server", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    record.game_id = "g1"
    assert TextFormatter().format(record).endswith("error: failed (game_id: g1; ValueError: worse)")


def test_auto_is_text_on_a_terminal_only() -> None:
    master, child = os.openpty()
    try:
        with open(child, "w", closefd=False) as terminal, open(os.devnull, "w") as elsewhere:
            assert chosen_format("auto", terminal) == "text"
            assert chosen_format("auto", elsewhere) == "json"
            assert chosen_format("json", terminal) == "json" and chosen_format("text", elsewhere) == "text"
    finally:
        os.close(master)
        os.close(child)
