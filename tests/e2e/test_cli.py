"""The `orchestra` command line, run as a real subprocess against a real server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestra_client import GameClient
from tests.support.e2e import PERF, STRINGS, expect_accepted, new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


async def orchestra(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `orchestra ARGS` (as `python -m server.ops.cli`) and capture its output."""
    command = [sys.executable, "-m", "server.ops.cli", *args]
    return await asyncio.to_thread(
        subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
    )


@pytest.fixture(scope="module")
def cli_server(start_module_server: Any) -> Any:
    return start_module_server()


async def test_orchestra_help_lists_every_command() -> None:
    done = await orchestra("--help")
    assert done.returncode == 0
    for command in ("serve", "new-game", "export", "replay"):
        assert command in done.stdout


async def test_orchestra_without_a_command_prints_its_help_and_fails() -> None:
    done = await orchestra()
    assert done.returncode == 2 and "new-game" in done.stdout


@pytest.mark.parametrize(
    ("command", "options"),
    [
        pytest.param("serve", ["--host", "--port", "--redis-url", "--data-dir", "ORCHESTRA_"], id="serve"),
        pytest.param("new-game", ["NAME", "--server", "--layout", "--private", "--api-key"], id="new-game"),
        pytest.param("export", ["game", "--server", "--token", "one JSON object per line"], id="export"),
        pytest.param("replay", ["game", "--at", "--server", "--token", "version"], id="replay"),
    ],
)
async def test_each_command_explains_itself_and_its_options(command: str, options: list[str]) -> None:
    done = await orchestra(command, "--help")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith(f"usage: orchestra {command}")
    for option in options:
        assert option.lower() in done.stdout.lower(), option


async def test_new_game_prints_the_game_id_each_seat_token_and_links(cli_server: Any) -> None:
    done = await orchestra("new-game", "Ada", "Ben", "--server", cli_server.url)
    assert done.returncode == 0, done.stderr
    found = re.search(r"^game (\S+) created$", done.stdout, re.MULTILINE)
    assert found is not None
    game_id = found.group(1)
    tokens = re.findall(r"^  seat (\d) (\w+): token (\S+)$", done.stdout, re.MULTILINE)
    assert [(seat, name) for seat, name, _ in tokens] == [("0", "Ada"), ("1", "Ben")]
    assert f"{cli_server.url}/games/{game_id}/watch" in done.stdout
    assert f"{cli_server.url}/games/{game_id}/play#token={tokens[0][2]}" in done.stdout
    for seat, _, token in tokens:
        async with await GameClient.connect(cli_server.url, game_id, token, reconnect=False) as player:
            assert player.welcome["role"] == "player" and player.welcome["seat"] == int(seat)


async def test_new_game_reports_a_refusal_and_fails(cli_server: Any) -> None:
    done = await orchestra("new-game", "x" * 41, "--server", cli_server.url)
    assert done.returncode == 1 and "400 bad_request" in done.stderr


async def test_export_prints_the_same_ndjson_as_the_events_route(cli_server: Any) -> None:
    game_id, tokens = await new_game(cli_server.url, ["Ada", "Ben"])
    async with await GameClient.connect(cli_server.url, game_id, tokens[1], reconnect=False) as ben:
        for token, space in ((PERF, "viola"), (STRINGS, "viola"), (PERF, "clarinet")):
            expect_accepted(await ben.place(token, space))
    done = await orchestra("export", game_id, "--server", cli_server.url)
    assert done.returncode == 0, done.stderr
    async with httpx.AsyncClient(base_url=cli_server.url) as http:
        expected = (await http.get(f"/games/{game_id}/events")).text
    assert done.stdout == expected and len(done.stdout.splitlines()) == 4


async def test_replay_prints_the_view_at_a_version(cli_server: Any) -> None:
    game_id, tokens = await new_game(cli_server.url, ["Ada"])
    async with await GameClient.connect(cli_server.url, game_id, tokens[0], reconnect=False) as ada:
        for space in ("viola", "clarinet", "timpani"):
            await ada.place(PERF, space)
    async with httpx.AsyncClient(base_url=cli_server.url) as http:
        for at in (1, 3, 4):
            done = await orchestra("replay", game_id, "--at", str(at), "--server", cli_server.url)
            assert done.returncode == 0, done.stderr
            expected = (await http.get(f"/games/{game_id}", params={"at": str(at)})).json()
            assert json.loads(done.stdout) == expected and expected["version"] == at


async def test_replay_past_the_version_fails_with_the_servers_reason(cli_server: Any) -> None:
    game_id, _ = await new_game(cli_server.url, ["Ada"])
    done = await orchestra("replay", game_id, "--at", "9", "--server", cli_server.url)
    assert done.returncode == 1 and "400 bad_request" in done.stderr and done.stdout == ""


def serve_with_api_key(key: str, directory: Path, redis_url: str) -> subprocess.CompletedProcess[str]:
    """`orchestra serve --port 0` with ORCHESTRA_API_KEY=key; it must exit on its own (a refusal)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env.update(ORCHESTRA_API_KEY=key, ORCHESTRA_REDIS_URL=redis_url, ORCHESTRA_DATA_DIR=str(directory))
    command = [sys.executable, "-m", "server.ops.cli", "serve", "--port", "0"]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="whitespace"),
        pytest.param("change-me", id="change-me"),
        pytest.param("changeme", id="changeme"),
        pytest.param("secret", id="secret"),
        pytest.param("password", id="password"),
        pytest.param("0123456789abcde", id="15-characters"),
        pytest.param("abababababababababab", id="too-few-different-characters"),
        pytest.param("REPLACE-ME-with-a-generated-key", id="the-deploy-examples-placeholder"),
        pytest.param("Change_Me_0123456789abcdef", id="a-placeholder-word-in-a-long-key"),
        pytest.param(" 9f8e7d6c5b4a32109f8e ", id="surrounding-whitespace"),
    ],
)
async def test_serve_refuses_to_start_with_an_empty_weak_or_placeholder_api_key(
    key: str, tmp_path: Path, redis_url: str
) -> None:
    done = await asyncio.to_thread(serve_with_api_key, key, tmp_path / "var", redis_url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "ORCHESTRA_API_KEY" in done.stderr and "not started" in done.stderr
    assert "running at" not in done.stdout
    if key.strip():
        assert key.strip() not in done.stderr  # the message never repeats the key
    assert not (tmp_path / "var").exists()  # nothing was started, not even the embedded Redis


async def test_serve_starts_with_a_generated_api_key(start_server: Any) -> None:
    key = "9f8e7d6c5b4a32109f8e7d6c"
    server = start_server(api_key=key)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.post("/games", json={"players": ["Ada"]})).status_code == 401
        keyed = await http.post(
            "/games", json={"players": ["Ada"]}, headers={"authorization": f"Bearer {key}"}
        )
        assert keyed.status_code == 201


async def test_demo_without_the_client_package_says_so_and_starts_nothing(tmp_path: Path) -> None:
    """The server's packages never import the client: `orchestra demo` loads it by name, and says what is
    missing when it is not installed (here hidden from the import system)."""
    hide_client = (
        "import sys; sys.modules['orchestra_client'] = None; from server.ops.cli import main; "
        f"sys.exit(main(['demo', '--port', '0', '--data-dir', {str(tmp_path / 'var')!r}]))"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", hide_client],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "orchestra_client.demo" in done.stderr and "not installed" in done.stderr
    assert "Traceback" not in done.stderr and "running at" not in done.stdout
    assert not (tmp_path / "var").exists()  # no server, no embedded Redis
