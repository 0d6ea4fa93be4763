"""Fresh virtual environments that the project is installed into as a user would, and servers run from them.

Installs need PyPI (or the index pip is configured with); pip's cache is kept, so a second install costs
little. Nothing is ever built or installed from the checkout itself: a build there would leave files in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.child import ChildServer

INSTALL_TIMEOUT = 600


@dataclass(frozen=True)
class Venv:
    """A virtual environment made by `python -m venv`, holding only what was installed into it."""

    path: Path

    @property
    def bin(self) -> Path:
        """Its scripts folder (python, pip, orchestra ...)."""
        return self.path / "bin"

    @property
    def python(self) -> Path:
        """Its interpreter."""
        return self.bin / "python"

    def environ(self, settings: Mapping[str, str] = {}) -> dict[str, str]:
        """A clean environment for its programs: its bin alone on PATH (so no redis-server of this
        machine is found, as in the image), no ORCHESTRA_* of the caller's, `settings` on top."""
        env = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "SSL_CERT_FILE")}
        env["PATH"] = str(self.bin)
        env.update(settings)
        return env

    def pip_install(self, *args: str, cwd: Path | None = None) -> None:
        """`pip install args` with this venv's pip. Raises: AssertionError with pip's output on failure."""
        command = [str(self.python), "-m", "pip", "install", "--quiet", *args]
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        assert done.returncode == 0, f"{' '.join(args)} did not install:\n{done.stdout}\n{done.stderr}"

    def serve(self, command: Sequence[str], cwd: Path, log: Path, settings: Mapping[str, str]) -> ChildServer:
        """`command` (a script of this venv and its arguments) as a server; it prints "running at URL"."""
        program = self.bin / command[0]
        assert program.exists(), f"{command[0]} is not a script of the installed project"
        return ChildServer([str(program), *command[1:]], self.environ(settings), log, cwd=cwd)


def make_venv(path: Path) -> Venv:
    """A new, empty virtual environment at `path` (with pip)."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    return Venv(path)


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """GET `url`: its status and body (an HTTP error's too)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()
