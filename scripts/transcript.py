"""Play a real three-player game over websockets and print every frame sent and received.

    .venv/bin/python scripts/transcript.py                  # starts its own server (embedded Redis)
    .venv/bin/python scripts/transcript.py --server URL     # against a running server
    .venv/bin/python scripts/transcript.py --jsonl          # one JSON object per frame, unabridged

The Markdown output is the transcript of docs/protocol.md: every frame is printed exactly as it went over
the wire, except that seat tokens are replaced by placeholders and, after the first full view, every `view` is
shortened to a note (pass --full to print every view), and a live frame received by several clients
(encoded once for all) is printed once with their names.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]
PERF = {"kind": "performance", "era": "classical"}
STRINGS = {"kind": "repair", "family": "strings"}


@contextmanager
def own_server(settings: dict[str, str] | None = None) -> Iterator[str]:
    """`orchestra serve` on a free port with its embedded Redis in a temporary directory, with `settings`
    (ORCHESTRA_* variables) if given."""
    with tempfile.TemporaryDirectory() as data:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
        env.update(settings or {})
        env["ORCHESTRA_DATA_DIR"] = data
        process = subprocess.Popen(
            [sys.executable, "-m", "server.ops.cli", "serve", "--port", "0"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        try:
            assert process.stdout is not None
            deadline = time.monotonic() + 30
            url = None
            while url is None and time.monotonic() < deadline:
                line = process.stdout.readline().decode()
                if "running at" in line:
                    url = line.rsplit(" ", 1)[1].strip().rstrip("/")
                elif not line and process.poll() is not None:
                    break
            if url is None:
                raise SystemExit("transcript: the server did not start")
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            if process.stdout is not None:
                process.stdout.close()


class Transcript:
    """Every step and frame, in order."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def step(self, title: str, note: str = "") -> None:
        self.items.append({"kind": "step", "title": title, "note": note})

    def http(self, request: str, body: Any, status: int, answer: str) -> None:
        self.items.append(
            {"kind": "http", "request": request, "body": body, "status": status, "answer": answer}
        )

    def frame(self, who: str, direction: str, text: str) -> None:
        self.items.append({"kind": "frame", "who": who, "dir": direction, "text": text})


class Conn:
    """One websocket client whose every frame is recorded."""

    def __init__(self, name: str, ws: websockets.ClientConnection, log: Transcript) -> None:
        self.name, self.ws, self.log = name, ws, log

    async def send(self, frame: dict[str, Any]) -> None:
        text = json.dumps(frame)
        self.log.frame(self.name, "sent", text)
        await self.ws.send(text)

    async def recv(self) -> dict[str, Any]:
        """The next frame but presence frames, which come at their own pace (left out of the transcript)."""
        while True:
            text = await asyncio.wait_for(self.ws.recv(), 10)
            assert isinstance(text, str)
            frame: dict[str, Any] = json.loads(text)
            if frame["type"] != "presence":
                self.log.frame(self.name, "received", text)
                return frame


async def connect(url: str, game_id: str, name: str, log: Transcript, hello: dict[str, Any]) -> Conn:
    ws = await websockets.connect(
        url.replace("http://", "ws://") + f"/games/{game_id}/ws", open_timeout=10, max_size=None
    )
    conn = Conn(name, ws, log)
    await conn.send({"type": "hello", **hello})
    welcome = await conn.recv()
    assert welcome["type"] == "welcome", welcome
    return conn


async def play(url: str) -> Transcript:
    log = Transcript()
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        log.step("Create the game", "Over HTTP. The seat tokens are shown this once.")
        body = {"players": ["Ada", "Ben", "Cy"]}
        response = await http.post("/games", json=body)
        log.http("POST /games", body, response.status_code, response.text)
        created = response.json()
        game_id = created["game_id"]
        tokens = [seat["token"] for seat in created["seats"]]

        log.step("Connect", "Each client says hello first; the welcome carries the version and the view.")
        watcher = await connect(url, game_id, "Spectator", log, {"token": None, "since": None})
        ada, ben, cy = [
            await connect(url, game_id, name, log, {"token": token, "since": None})
            for name, token in zip(("Ada", "Ben", "Cy"), tokens, strict=True)
        ]
        everyone = [watcher, ada, ben, cy]

        version = created["version"]

        async def command(sender: Conn, frame: dict[str, Any]) -> dict[str, Any]:
            nonlocal version
            await sender.send(frame)
            answer = await sender.recv()
            own_copy = answer["type"] == "events"  # the sender's copy of the live frame may come first
            if own_copy:
                answer = await sender.recv()
            if answer["type"] == "accepted" and answer["version"] > version:  # not a repeated id
                version = answer["version"]
                for other in everyone:
                    if other is not sender or not own_copy:  # else after the answer
                        live = await other.recv()
                        assert live["type"] == "events", live
            return answer

        moves: list[tuple[str, Conn, dict[str, Any]]] = [
            (
                "Ada: a Classical performance to the empty Viola: she claims the chair",
                ada,
                {"type": "place", "id": "a-1", "token": PERF, "space": "viola"},
            ),
            (
                "Ben: a Strings repair to Viola: 1 against 1, no majority",
                ben,
                {"type": "place", "id": "b-1", "token": STRINGS, "space": "viola"},
            ),
            (
                "Ben: a Classical performance to Viola: 2 against 1, he steals the chair",
                ben,
                {"type": "place", "id": "b-2", "token": PERF, "space": "viola", "consolation": "inspiration"},
            ),
            (
                "Ada: a Strings repair to Viola: 2 against 2, a tie never steals",
                ada,
                {"type": "place", "id": "a-2", "token": STRINGS, "space": "viola"},
            ),
            (
                "Cy: the Viola instrument, finished by a skill-6 worker: it takes the chair, bonus doubled",
                cy,
                {
                    "type": "place",
                    "id": "c-1",
                    "token": {"kind": "instrument", "instrument": "viola"},
                    "space": "viola",
                    "skill": 6,
                },
            ),
            (
                "Ben: a Classical performance to Viola: an instrument holds it",
                ben,
                {"type": "place", "id": "b-3", "token": PERF, "space": "viola", "expected_version": 6},
            ),
            (
                "Cy: Rare Strings, naming the material of his choice",
                cy,
                {
                    "type": "place",
                    "id": "c-2",
                    "token": {"kind": "instrument", "instrument": "rare_strings"},
                    "space": "rare_strings",
                    "materials": ["wood"],
                },
            ),
            (
                "Ben: a Winds repair to Viola: not a space for that token",
                ben,
                {
                    "type": "place",
                    "id": "b-4",
                    "token": {"kind": "repair", "family": "winds"},
                    "space": "viola",
                },
            ),
            (
                "Cy: Rare Strings without a material",
                cy,
                {
                    "type": "place",
                    "id": "c-3",
                    "token": {"kind": "instrument", "instrument": "rare_strings"},
                    "space": "rare_strings",
                },
            ),
            (
                "Ada: a command that expected an older version",
                ada,
                {"type": "place", "id": "a-3", "token": PERF, "space": "clarinet", "expected_version": 3},
            ),
            (
                "Ben: a `seat` field (the seat comes from the token)",
                ben,
                {"type": "place", "id": "b-5", "token": PERF, "space": "timpani", "seat": 0},
            ),
            (
                "Ada: the id of an accepted command again: the first answer, nothing appended",
                ada,
                {"type": "place", "id": "a-1", "token": PERF, "space": "viola"},
            ),
            ("Ben: only seat 0 may end the game", ben, {"type": "end_game", "id": "b-6"}),
            ("Ada ends the game: final scores and ranking", ada, {"type": "end_game", "id": "a-4"}),
            (
                "Cy: a placement after the end",
                cy,
                {"type": "place", "id": "c-4", "token": PERF, "space": "timpani"},
            ),
        ]
        for title, sender, frame in moves:
            log.step(title)
            await command(sender, frame)

        log.step("A spectator resumes with since", "History comes as events frames without view.")
        late = await connect(url, game_id, "Late spectator", log, {"token": None, "since": 6, "view": False})
        history = await late.recv()  # versions 7, 8 and 9 in one frame
        assert [e["version"] for e in history["envelopes"]] == [7, 8, 9], history
        for conn in (*everyone, late):
            await conn.ws.close()

        log.step("Read the result over HTTP")
        for path in (f"/games/{game_id}/events?after=8",):
            response = await http.get(path)
            log.http(f"GET {path}", None, response.status_code, response.text)
    return log


def markdown(log: Transcript, full: bool, names: dict[str, str]) -> str:
    def redact(text: str) -> str:
        for token, placeholder in names.items():
            text = text.replace(token, placeholder)
        return text

    out: list[str] = []
    shown_view = False
    number = 0
    for item in log.items:
        if item["kind"] == "step":
            number += 1
            out.append(f"\n#### {number}. {item['title']}\n")
            if item["note"]:
                out.append(item["note"] + "\n")
        elif item["kind"] == "http":
            out.append("```http")
            out.append(item["request"])
            if item["body"] is not None:
                out.append(json.dumps(item["body"]))
            out.append(f"\n-> {item['status']}")
            out.append(redact(item["answer"].rstrip("\n")))
            out.append("```")
        else:
            text = item["text"]
            frame = json.loads(text)
            if isinstance(frame.get("view"), dict) and not full:
                if shown_view:
                    version = frame["view"]["version"]
                    frame["view"] = {
                        "...": f"the view at version {version}, as GET /games/{{id}}?at={version}"
                    }
                    text = json.dumps(frame, separators=(",", ":"))
                shown_view = True
            arrow = "->" if item["dir"] == "sent" else "<-"
            out.append(f"```\n{item['who']} {arrow} {redact(text)}\n```")
    return "\n".join(out) + "\n"


def squash(log: Transcript) -> Transcript:
    """Fold identical live frames received by several clients into one line naming them all."""
    folded = Transcript()
    for item in log.items:
        last = folded.items[-1] if folded.items else None
        if (
            item["kind"] == "frame"
            and item["dir"] == "received"
            and last is not None
            and last["kind"] == "frame"
            and last["dir"] == "received"
            and last["text"] == item["text"]
            and json.loads(item["text"])["type"] == "events"
        ):
            last["who"] += ", " + item["who"]
            continue
        folded.items.append(dict(item))
    return folded


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", help="a running server's URL (default: start one)")
    parser.add_argument("--jsonl", action="store_true", help="print every frame as one JSON line, unabridged")
    parser.add_argument("--full", action="store_true", help="print every view in full")
    args = parser.parse_args()

    def run(url: str) -> Transcript:
        return asyncio.run(play(url))

    if args.server:
        log = run(args.server.rstrip("/"))
    else:
        with own_server() as url:
            log = run(url)
    if args.jsonl:
        for item in log.items:
            print(json.dumps(item))
        return 0
    created = json.loads(next(i for i in log.items if i["kind"] == "http")["answer"])
    names = {seat["token"]: f"<{seat['name']}'s seat token>" for seat in created["seats"]}
    print(markdown(squash(log), args.full, names), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
