"""What the JavaScript tests need: Node 20+, npm, and clients/js's pinned dev tools (`npm ci` there)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser.conftest import browser  # noqa: F401  (the headless Chromium fixture, for the pages these tests load)

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "js"


def node_problem() -> str | None:
    """Why the JavaScript tests cannot run here, or None."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        return "node or npm is not installed (apt-get install nodejs npm, then npm ci in clients/js)"
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    if int(version.strip().lstrip("v").split(".")[0]) < 20:
        return f"node {version.strip()} is too old: the client needs Node 20+"
    if (
        not (CLIENT / "node_modules" / "ws").is_dir()
        or not (CLIENT / "node_modules" / ".bin" / "tsc").exists()
    ):
        return "clients/js/node_modules is missing: run `npm ci` in clients/js"
    return None


@pytest.fixture
def node() -> str:
    """The path of node, or the test skips saying why it cannot run."""
    problem = node_problem()
    if problem is not None:
        pytest.skip(problem)
    found = shutil.which("node")
    assert found is not None
    return found
