"""`orchestra serve` in a child process (uvicorn on a free port): e2e, browser and reliability tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """`orchestra serve` in a child process; its JSON log lines are kept in a file."""

    def __init__(self, redis_url: str | None, directory: Path, port: int = 0, **settings: object) -> None:
        self.directory = directory
        self.log_path = directory / "server.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
        env.update({f"ORCHESTRA_{k.upper()}": str(v) for k, v in settings.items()})
        if redis_url is not None:
            env["ORCHESTRA_REDIS_URL"] = redis_url
        env.setdefault("ORCHESTRA_DATA_DIR", str(directory / "var"))
        directory.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
        )
        self.url = self._wait_for_url()

    def _wait_for_url(self, timeout: float = 30.0) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline().decode()
            if "running at" in line:
                return line.rsplit(" ", 1)[1].strip().rstrip("/")
            if not line and self.process.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"the server did not start: {self.log_path.read_text()[-2000:]}")

    def logs(self) -> str:
        """Everything the server logged so far."""
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
