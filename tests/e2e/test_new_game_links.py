"""`orchestra new-game` prints the game's links (the host's, each seat's play link, the watch link), and on
a terminal a QR code of each, which a real decoder (zxing-cpp) reads back as the link printed above it."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestra_client import GameClient

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
# The half blocks a terminal QR code is drawn with, two modules a character cell: (top, bottom) light.
HALVES = {"\u2588": (True, True), "\u2580": (True, False), "\u2584": (False, True), " ": (False, False)}


def run_on_terminal(*args: str) -> str:
    """`orchestra ARGS` with its output on a pseudo-terminal; what it printed."""
    leader, follower = pty.openpty()
    command = [sys.executable, "-m", "server.ops.cli", *args]
    process = subprocess.Popen(command, cwd=ROOT, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done writing
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=30) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def decode_block(lines: list[str]) -> str:
    """The text of a QR code drawn in half blocks (light modules drawn), read by zxing-cpp."""
    zxingcpp = pytest.importorskip("zxingcpp", reason="zxing-cpp is not installed (pip install -e '.[test]')")
    from PIL import Image

    width = max(len(line) for line in lines)
    scale = 8
    picture = Image.new("L", (width * scale, len(lines) * 2 * scale), 255)
    for y, line in enumerate(lines):
        for x, cell in enumerate(line.ljust(width)):
            for half, light in enumerate(HALVES[cell]):
                if not light:
                    # The terminal draws light modules; a dark module is a cell left empty.
                    box = (x * scale, (2 * y + half) * scale, (x + 1) * scale, (2 * y + half + 1) * scale)
                    picture.paste(0, box)
    # A white border: the terminal's margin, where a phone's camera sees the background.
    framed = Image.new("L", (picture.width + 8 * scale, picture.height + 8 * scale), 0)
    framed.paste(picture, (4 * scale, 4 * scale))
    found = zxingcpp.read_barcodes(framed)
    assert len(found) == 1, f"{len(found)} codes read"
    return str(found[0].text)


def codes_after_links(output: str) -> dict[str, str]:
    """Each printed link and the text of the QR code printed right below it."""
    lines = output.splitlines()
    read = {}
    for index, line in enumerate(lines):
        found = re.match(r"^\s+(?:watch|host|play):\s+(\S+)$", line)
        if not found:
            continue
        block = []
        for below in lines[index + 1 :]:
            if not below or set(below) - set(HALVES):
                break
            block.append(below)
        read[found.group(1)] = decode_block(block)
    return read


@pytest.fixture(scope="module")
def cli_server(start_module_server: Any) -> Any:
    return start_module_server()


async def test_on_a_terminal_each_link_has_a_qr_code_that_reads_as_the_link(cli_server: Any) -> None:
    output = await asyncio.to_thread(run_on_terminal, "new-game", "Ada", "Ben", "--server", cli_server.url)
    game_id = re.search(r"^game (\S+) created$", output, re.MULTILINE).group(1)  # type: ignore[union-attr]
    read = codes_after_links(output)
    plays = [link for link in read if "/play#token=" in link]
    assert len(plays) == 2
    assert f"{cli_server.url}/games/{game_id}/watch" in read
    for link, text in read.items():
        assert text == link
    # What the first play link's code holds is Ada's seat.
    token = plays[0].split("#token=")[1]
    async with await GameClient.connect(cli_server.url, game_id, token, reconnect=False) as player:
        assert player.welcome["seat"] == 0


async def test_piped_it_prints_the_links_without_codes(cli_server: Any) -> None:
    command = [sys.executable, "-m", "server.ops.cli", "new-game", "Ada", "--server", cli_server.url]
    done = await asyncio.to_thread(
        subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert "/play#token=" in done.stdout
    assert not set(done.stdout) & set("\u2588\u2580\u2584")


async def test_a_dash_leaves_a_seat_open_and_open_lists_the_table(cli_server: Any) -> None:
    command = [sys.executable, "-m", "server.ops.cli", "new-game", "Ada", "-", "-", "--open"]
    done = await asyncio.to_thread(
        subprocess.run, [*command, "--server", cli_server.url], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    game_id = re.search(r"^game (\S+) created$", done.stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]
    assert "seat 1 (open)" in done.stdout and "seat 2 (open)" in done.stdout
    async with httpx.AsyncClient(base_url=cli_server.url) as http:
        view = (await http.get(f"/games/{game_id}")).json()
        tables = (await http.get("/games/open")).json()
    assert [player["name"] for player in view["players"]] == ["Ada", None, None]
    assert game_id in [table["game_id"] for table in tables]
