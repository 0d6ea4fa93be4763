"""scripts/transcript.py plays a real game; its frames must follow the protocol, and the docs show it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "transcript.py"


async def transcript(*args: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def played(start_module_server: Any) -> Any:
    return start_module_server()


async def test_every_command_of_the_transcript_gets_exactly_one_answer_and_versions_are_contiguous(
    played: Any,
) -> None:
    items = [json.loads(line) for line in (await transcript("--jsonl", "--server", played.url)).splitlines()]
    frames: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for item in items:
        if item["kind"] == "frame":
            frames[item["who"]].append((item["dir"], json.loads(item["text"])))
    assert set(frames) == {"Spectator", "Ada", "Ben", "Cy", "Late spectator"}
    created = json.loads(next(i for i in items if i["kind"] == "http")["answer"])
    game_id = created["game_id"]
    async with httpx.AsyncClient(base_url=played.url) as http:
        lines = (await http.get(f"/games/{game_id}/events")).content.splitlines()
    stored = [json.loads(line) for line in lines]
    for before, after in zip(lines, stored[1:], strict=False):
        # What the proof covers: the line without its proof (protocol.md, section 7).
        assert after["prev"] == hashlib.sha256(before[: before.rindex(b',"proof":')] + b"}").hexdigest()
    last = stored[-1]["version"]
    assert stored[-1]["event"]["type"] == "GameEnded"

    for who, sequence in frames.items():
        (direction, hello), (_, welcome) = sequence[:2]
        assert (direction, hello["type"], welcome["type"]) == ("sent", "hello", "welcome")
        assert welcome["view"]["version"] == welcome["version"]
        expected = (hello["since"] if hello["since"] is not None else welcome["version"]) + 1
        received = [
            e for d, f in sequence if d == "received" and f["type"] == "events" for e in f["envelopes"]
        ]
        assert [e["version"] for e in received] == list(range(expected, last + 1)), who
        assert received == stored[expected - 1 :]
        for _, frame in sequence:
            if frame["type"] == "events" and "view" in frame:
                assert frame["view"]["version"] == frame["envelopes"][-1]["version"]
        pending: list[dict[str, Any]] = []
        answers = 0
        for direction, frame in sequence[2:]:
            if direction == "sent":
                assert not pending, f"{who} sent before its previous command was answered"
                pending.append(frame)
            elif frame["type"] in ("accepted", "rejected"):
                command = pending.pop()
                answers += 1
                assert frame["id"] == command["id"]
                if frame["type"] == "accepted":
                    assert frame["version"] == frame["events"][-1]["version"]
                    assert frame["events"] == stored[frame["events"][0]["version"] - 1 : frame["version"]]
                else:
                    assert frame["code"] in (
                        "illegal_space",
                        "missing_choice",
                        "stale_version",
                        "bad_request",
                        "forbidden",
                        "game_over",
                    )
        assert not pending
        assert answers == len([1 for d, f in sequence if d == "sent" and f["type"] != "hello"])


async def test_the_markdown_transcript_runs_its_own_server_and_matches_the_docs() -> None:
    markdown = await transcript()
    steps = re.findall(r"^#### \d+\. (.+)$", markdown, re.MULTILINE)
    assert len(steps) >= 15 and "Ada ends the game: final scores and ranking" in steps
    assert "seat token>" in markdown
    for code in ("illegal_space", "missing_choice", "stale_version", "bad_request", "forbidden", "game_over"):
        assert f'"code":"{code}"' in markdown
    docs = (ROOT / "docs" / "protocol.md").read_text()
    assert re.findall(r"^#### \d+\. (.+)$", docs, re.MULTILINE) == steps
