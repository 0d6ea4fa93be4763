"""A server as a child process, for the benchmarks and the tests (tests/support): it prints "running at
URL" when it listens.

`orchestra serve` announces its address on stdout (port 0 picks a free one); its logs go to stderr, kept
here in a file (JSON lines: the file is no terminal). It lives here, not in the server's package, so that
the wheel carries none of it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class ChildServer:
    """Starts `command` and waits for its "running at URL" line. Raises: RuntimeError if it never comes."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
        )
        self.url = self._wait_for_url(timeout)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def logs(self) -> str:
        """Everything the child logged so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def terminate(self) -> int:
        """SIGTERM, as an orchestrator would; returns the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(15)

    def kill(self) -> None:
        """SIGKILL: no shutdown at all."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM (SIGKILL if it lingers), then close the pipes."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()

    def __enter__(self) -> ChildServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_for_url(self, timeout: float) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline().decode()
            if "running at" in line:
                return line.rsplit(" ", 1)[1].strip().rstrip("/")
            if not line and self.process.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"the server did not start: {self.log_path.read_text(errors='replace')[-2000:]}")
