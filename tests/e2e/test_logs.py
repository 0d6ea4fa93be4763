"""Structured logs: one JSON object per line, commands traceable, and never a secret anywhere."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import httpx
import pytest

from orchestra_client import ConnectionRefused, GameClient
from server.ops.logs import WithoutTargets, setup
from tests.support.e2e import PERF, STRINGS, assert_clean_logs, eventually, log_lines, next_answer

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


@pytest.fixture(scope="module")
def logged(start_module_server: Any) -> Any:
    return start_module_server(log_level="debug")  # accepted commands are logged at debug


class Scenario:
    """Games played in every way a secret could leak; what was seen is kept for scanning."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.seen: list[str] = []  # every view, export and rejection frame, as text
        self.commands: list[dict[str, Any]] = []  # every answer to a command sent with an id

    async def play(self, url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            public = (await http.post("/games", json={"players": ["Ada", "Ben"]})).json()
            private = (await http.post("/games", json={"players": ["Cy"], "spectators": "token"})).json()
            self.tokens += [s["token"] for s in public["seats"] + private["seats"]] + [private["watch_token"]]
            for created in (public, private):
                game_id, token = created["game_id"], created["seats"][0]["token"]
                await self.commands_of(url, game_id, token)
                auth = {"authorization": f"Bearer {token}"}
                for path in (f"/games/{game_id}", f"/games/{game_id}/events", f"/games/{game_id}?at=2"):
                    self.seen.append((await http.get(path, headers=auth)).text)
                self.seen.append((await http.get(f"/games/{game_id}")).text)  # 403 for the private one
            self.seen.append((await http.get("/games")).text)
            # Refused hellos: a token of another game, a token of no game, the private game without one.
            for game_id, token in (
                (public["game_id"], private["seats"][0]["token"]),
                (public["game_id"], "not-a-token"),
                (private["game_id"], None),
            ):
                with pytest.raises(ConnectionRefused) as refused:
                    await GameClient.connect(url, game_id, token, reconnect=False)
                self.seen.append(json.dumps(refused.value.frame) + refused.value.reason)
            async with await GameClient.connect(
                url, private["game_id"], private["watch_token"], reconnect=False
            ) as watcher:
                self.seen.append(json.dumps(await watcher.place(PERF, "viola")))

    async def commands_of(self, url: str, game_id: str, token: str) -> None:
        async with await GameClient.connect(url, game_id, token, reconnect=False) as player:
            self.seen.append(json.dumps(player.welcome))
            for fields in (
                {"token": PERF, "space": "viola", "id": "ok-1"},
                {"token": STRINGS, "space": "oboe", "id": "illegal-1"},
                {"token": PERF, "space": "moon", "id": "unknown-1"},
                {"token": PERF, "space": "viola", "id": "ok-1"},  # a repeat
            ):
                answer = await player.send({"type": "place", **fields})
                self.commands.append(answer)
                self.seen.append(json.dumps(answer))
            await player.send_raw('{"type": "place", "token": ')
            self.seen.append(json.dumps(await next_answer(player)))
            self.seen.append(json.dumps(await player.end_game(id="end-1")))


async def test_every_log_line_is_one_json_object(logged: Any) -> None:
    await Scenario().play(logged.url)
    logs = logged.logs()
    lines = log_lines(logs)
    assert len(lines) == len([line for line in logs.splitlines() if line.strip()]) > 5
    for line in lines:
        assert {"ts", "level", "logger", "msg"} <= set(line)
        assert line["ts"].endswith("Z") and line["level"] in ("debug", "info", "warning")
    assert_clean_logs(logs)


async def test_command_lines_carry_the_game_seat_command_id_and_version(logged: Any) -> None:
    scenario = Scenario()
    await scenario.play(logged.url)
    lines = log_lines(logged.logs())
    commands = [line for line in lines if line["msg"] in ("command accepted", "command rejected")]
    for command in commands:
        assert {"game_id", "seat", "command_id", "version"} <= set(command)
        assert isinstance(command["version"], int) and command["seat"] in (0, 1)
    logged_ids = {c["command_id"] for c in commands}
    assert {"ok-1", "illegal-1", "unknown-1", "end-1"} <= logged_ids
    rejected = [c for c in commands if c["msg"] == "command rejected"]
    assert {c["code"] for c in rejected} >= {"illegal_space", "bad_request"}
    accepted = [c for c in commands if c["msg"] == "command accepted"]
    assert all("duration_ms" in c for c in accepted)


async def test_no_seat_or_watch_token_appears_in_logs_views_exports_or_rejections(logged: Any) -> None:
    scenario = Scenario()
    await scenario.play(logged.url)
    assert len(scenario.tokens) == 4 and len(scenario.seen) > 15
    assert any('"rejected"' in text for text in scenario.seen)
    everything = "\n".join([logged.logs(), *scenario.seen])
    for token in scenario.tokens:
        assert token not in everything
        assert token[:12] not in everything  # nor a recognisable part of one


def test_at_debug_no_frame_text_of_uvicorn_or_websockets_is_written() -> None:
    """Their debug lines carry each frame's text, a hello's token with it; the server's own do not."""
    root = logging.getLogger()
    kept = (root.handlers[:], root.level)
    levels = {name: logging.getLogger(name).level for name in ("uvicorn", "websockets")}
    stream = io.StringIO()
    try:
        setup("debug", stream)
        logging.getLogger("uvicorn.error").debug('< TEXT \'{"type":"hello","token":"secret-1"}\'')
        logging.getLogger("websockets.server").debug("< TEXT secret-2")
        logging.getLogger("server.web.ws").debug("command accepted")
        logging.getLogger("uvicorn.error").info("started")
    finally:
        root.handlers[:], _ = kept
        root.setLevel(kept[1])
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    written = stream.getvalue()
    assert "secret" not in written
    assert "command accepted" in written and "started" in written


async def test_a_websocket_session_writes_one_access_line_and_no_open_or_closed_line(logged: Any) -> None:
    """The "connection open" and "connection closed" that websockets writes (through uvicorn's logger)
    name no game or peer; the access log's line per session (route, duration, peer) is the one line a
    connection writes at info."""
    async with httpx.AsyncClient(base_url=logged.url, timeout=10) as http:
        game = (await http.post("/games", json={"players": ["Ada"]})).json()
    before = len(log_lines(logged.logs()))
    for _ in range(3):
        async with await GameClient.connect(logged.url, game["game_id"], reconnect=False) as spectator:
            assert spectator.welcome["type"] == "welcome"

    async def written() -> None:
        lines = log_lines(logged.logs())[before:]
        sessions = [line for line in lines if line["msg"] == "websocket session"]
        assert len(sessions) == 3
        assert all(line["route"] == "/games/{game_id}/ws" and line["peer"] for line in sessions)
        assert not [line for line in lines if line["msg"] in ("connection open", "connection closed")]

    # A session's line is written as the server ends it, which may come just after the client has closed.
    await eventually(written, timeout=10)


@pytest.mark.logs_warnings  # it logs an error to uvicorn's logger, to see it filtered
def test_uvicorns_lines_are_filtered_whatever_object_their_message_is() -> None:
    """A message that is no string (a dict: unhashable) is written, not a TypeError in the logging call."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(WithoutTargets())
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        logger.error({"state": "odd"})
        logger.info("connection open")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "{'state': 'odd'}\n"
