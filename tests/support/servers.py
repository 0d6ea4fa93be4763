"""`orchestra serve` in a child process (uvicorn on a free port): e2e, browser and reliability tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.child import ChildServer

ROOT = Path(__file__).resolve().parents[2]

# Every server started in this process whose log the clean-log check (tests/conftest.py) still reads.
STARTED: list[ServerProcess] = []


class ServerProcess(ChildServer):
    """`orchestra serve` with the given settings (as ORCHESTRA_* variables) on a Redis, or embedded."""

    def __init__(self, redis_url: str | None, directory: Path, port: int = 0, **settings: object) -> None:
        """`crash_after_append=True` among the settings: the process exits (status 3) right after its first
        append of commands, before answering (tests/support/crash_after_append.py); no setting does that."""
        crash_after_append = bool(settings.pop("crash_after_append", False))
        self.directory = directory
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
        env.update({f"ORCHESTRA_{k.upper()}": str(v) for k, v in settings.items()})
        if redis_url is not None:
            env["ORCHESTRA_REDIS_URL"] = redis_url
        env.setdefault("ORCHESTRA_DATA_DIR", str(directory / "var"))
        # Tests create games faster than any client should: no per-address rate unless a test sets one.
        env.setdefault("ORCHESTRA_CREATE_RATE_PER_MINUTE", "0")
        directory.mkdir(parents=True, exist_ok=True)
        entry = "tests.support.crash_after_append" if crash_after_append else "server.ops.cli"
        command = [sys.executable, "-m", entry, "serve", "--port", str(port)]
        super().__init__(command, env, directory / "server.log", cwd=ROOT)
        # Where its log stood once it served: the clean-log check reads from here on. What it says as it
        # starts (a key made for this node alone, a limit fitted to the machine) is the start-up tests'.
        self.serving_from = len(self.logs())
        STARTED.append(self)
