"""`orchestra serve` refuses the examples' Redis password and a signing key file others may read (unless
ORCHESTRA_SIGNING_KEY_READABLE says so), before it starts anything."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.engine.signing import Signer
from server.ops import signing_keys

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


async def serve(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env.update({"ORCHESTRA_DATA_DIR": str(tmp_path / "var"), **settings})
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server.ops.cli", "serve", "--port", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_serve_refuses_the_examples_redis_password(tmp_path: Path) -> None:
    done = await serve(tmp_path, ORCHESTRA_REDIS_URL="redis://:change-me@127.0.0.1:6379/0")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "placeholder word 'changeme'" in done.stderr and "the server was not started" in done.stderr
    assert not (tmp_path / "var").exists()  # refused before anything: not even its signing key made


async def test_serve_refuses_a_key_file_others_may_read_unless_told_to_accept_it(
    start_server: Callable[..., Any], tmp_path: Path
) -> None:
    path = tmp_path / "shared.key"
    signer = Signer.generate()
    signing_keys.write_key(path, signer)
    path.chmod(0o644)
    done = await serve(tmp_path, ORCHESTRA_SIGNING_KEY_FILE=str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{path} may be read by group or others (mode 0644)" in done.stderr
    assert "ORCHESTRA_SIGNING_KEY_READABLE" in done.stderr

    node = start_server(signing_key_file=str(path), signing_key_readable="true")
    async with httpx.AsyncClient(base_url=node.url) as http:
        assert (await http.get("/signing-keys")).json()["current"] == signer.key_id
