"""A secret a client puts anywhere it can is never written out: a canary token goes into every query string,
header, frame, body and unknown path, and is then looked for in the server's log (at debug), /metrics and
every event, view and export."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import secrets
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import websockets

from server.ops.logs import setup, without_query
from tests.support.e2e import PERF, log_lines
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

# Shaped like a seat token (URL-safe base64), so that anything that would write a token writes this.
CANARY = "cAnArY" + secrets.token_urlsafe(24).replace("-", "x").replace("_", "y")
QUERY = {"token": CANARY, "access_token": CANARY, "key": CANARY, "at": CANARY, "limit": CANARY}
BEARER = {"authorization": f"Bearer {CANARY}"}


@pytest.fixture(scope="module")
def node(start_module_server: Any) -> Any:
    """A server logging at debug, the most it ever writes."""
    return start_module_server(log_level="debug")


def ws_url(base: str, path: str, query: str = "") -> str:
    return base.replace("http://", "ws://") + path + query


async def ws_session(url: str, frames: list[str | bytes], answers: int) -> list[str]:
    """Send `frames` on a websocket, then read up to `answers` frames (and the close reason, if any)."""
    seen: list[str] = []
    try:
        async with websockets.connect(url, open_timeout=5, additional_headers=BEARER) as socket:
            for frame in frames:
                await socket.send(frame)
            for _ in range(answers):
                seen.append(str(await asyncio.wait_for(socket.recv(), 5)))
    except websockets.ConnectionClosed as closed:
        seen.append(closed.rcvd.reason if closed.rcvd else "")
    except (websockets.InvalidStatus, TimeoutError) as exc:
        seen.append(str(exc))
    return seen


async def send_everywhere(base: str) -> tuple[list[str], list[str]]:
    """Put the canary everywhere a client can; the ids of the games made, and every answer that is a view
    or an export (which must not hold it either)."""
    query = "?" + "&".join(f"{k}={quote(v)}" for k, v in QUERY.items())
    games: list[str] = []
    readers: dict[str, dict[str, str]] = {}  # the headers that read each game
    shown: list[str] = []
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        # Bodies: the canary in every field that is not a player's name (names are public by design).
        for body in (
            {"players": ["Ada", "Ben"]},
            {"players": ["Cy"], "spectators": "token"},
            {"players": ["Ada"], "layout": CANARY},
            {"players": ["Ada"], "spectators": CANARY},
            {"players": ["Ada"], CANARY: CANARY},
            {"players": [["Ada"]], "token": CANARY},
        ):
            answer = await http.post("/games" + query, json=body, headers=BEARER)
            if answer.status_code == 201:
                made = answer.json()
                games.append(made["game_id"])
                watch = made.get("watch_token")
                readers[made["game_id"]] = {"authorization": f"Bearer {watch}"} if watch else {}
        await http.post("/games" + query, content=CANARY.encode(), headers=BEARER)
        public, private = games
        routes = [
            "/",
            "/games",
            "/healthz",
            "/readyz",
            "/schema.json",
            "/static/watch.js",
            "/client/orchestra.js",
            *(
                f"/games/{game_id}{tail}"
                for game_id in games
                for tail in ("", "/events", "/watch", "/play", "/replay", "/legal")
            ),
        ]
        for path in routes:
            await http.get(path + query, headers=BEARER)
            await http.get(path, params={"at": "1", "after": "0", "limit": "5", "token": CANARY})
        # Unknown paths, the canary in them.
        for path in (
            f"/{CANARY}",
            f"/games/{CANARY}",
            f"/games/{CANARY}/events",
            f"/games/{CANARY}/watch",
            f"/static/{CANARY}.js",
            f"/games/{public}/{CANARY}",
        ):
            await http.get(path + query, headers=BEARER)
            await http.post(path, content=CANARY.encode(), headers=BEARER)
        # A token sent where it belongs, as a seat token of a game it is not: refused, never echoed.
        created = (await http.post("/games", json={"players": ["Dee"]})).json()
        games.append(created["game_id"])
        token = created["seats"][0]["token"]
        readers[created["game_id"]] = {}

    hello = json.dumps({"type": "hello", "token": CANARY})
    own = json.dumps({"type": "hello", "token": token})
    for game_id in (public, private, CANARY):
        path = f"/games/{quote(game_id)}/ws"
        await ws_session(ws_url(base, path, query), [hello], 2)
        await ws_session(ws_url(base, path, query), [CANARY], 2)  # a first frame that is no hello
        await ws_session(ws_url(base, path, query), [f'{{"type": "hello", "token": "{CANARY}'], 2)
    # A player of its own game, sending the canary in every field of command frames and in bad frames.
    bad: list[str | bytes] = [
        json.dumps({"type": "place", "id": "c-1", "token": {"kind": CANARY}, "space": "viola"}),
        json.dumps({"type": "place", "id": "c-2", "token": PERF, "space": CANARY}),
        json.dumps({"type": "place", "id": "c-3", "token": PERF, "space": "viola", CANARY: 1}),
        json.dumps({"type": "place", "id": "c-4", "token": PERF, "space": "viola", "materials": [CANARY]}),
        json.dumps({"type": "place", "id": "c-5", "token": PERF, "space": "viola", "consolation": CANARY}),
        json.dumps(
            {"type": "place", "id": "c-6", "token": PERF, "space": "viola", "expected_version": CANARY}
        ),
        json.dumps({"type": CANARY, "id": "c-7"}),
        json.dumps({"type": "end_game", "id": f"{CANARY}!"}),  # an id outside the id pattern
        json.dumps({"type": "hello", "token": CANARY}),
        '{"type": "place", "id": "c-8", "token": "' + CANARY,
        CANARY,
        CANARY.encode(),
    ]
    # Its answers are its own frames coming back (a rejection may quote what it sent): not checked.
    answers = await ws_session(ws_url(base, f"/games/{games[-1]}/ws", query), [own, *bad], 1 + len(bad))
    assert json.loads(answers[0])["type"] == "welcome" and len(answers) == 1 + len(bad)

    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        for game_id in games:
            headers = readers[game_id]
            for path in (f"/games/{game_id}", f"/games/{game_id}/events", f"/games/{game_id}?at=1"):
                answer = await http.get(path, headers=headers)
                assert answer.status_code == 200, answer.text
                shown.append(answer.text)
        shown.append((await http.get("/games")).text)
    return games, shown


async def test_a_canary_sent_everywhere_is_in_no_log_metrics_event_view_or_export(node: Any) -> None:
    games, shown = await send_everywhere(node.url)
    assert len(games) == 3 and len(shown) == 10
    written = len(log_lines(node.logs()))
    async with httpx.AsyncClient(base_url=node.url, timeout=10) as http:
        metrics = (await http.get("/metrics")).text
    # The last access line, that of /metrics: every one before it is written.
    await until(lambda: any(line.get("route") == "/metrics" for line in log_lines(node.logs())[written:]))
    logs = node.logs()
    lines = log_lines(logs)
    assert any(line["msg"] == "request" for line in lines)  # the access log was written
    assert any(line.get("level") == "debug" for line in lines)  # at debug
    for where, text in (("log", logs), ("metrics", metrics), ("views and exports", "\n".join(shown))):
        assert text and CANARY not in text, where
        assert CANARY[:16] not in text, where  # nor a recognisable part of it
        assert quote(CANARY) not in text, where


async def test_the_access_log_names_the_route_method_status_and_peer_but_never_the_url(node: Any) -> None:
    written = len(log_lines(node.logs()))
    async with httpx.AsyncClient(base_url=node.url, timeout=10) as http:
        game_id = (await http.post("/games", json={"players": ["Ada"]})).json()["game_id"]
        await http.get(f"/games/{game_id}/events?after=0&note=hello")
        await http.get("/no/such/page?x=1")
    with contextlib.suppress(Exception):
        await ws_session(ws_url(node.url, f"/games/{game_id}/ws", "?x=1"), ["not a hello"], 1)

    def session_written() -> bool:  # the websocket session's line, written as the server ends it
        return any(line["msg"] == "websocket session" for line in log_lines(node.logs())[written:])

    await until(session_written, what="the websocket session's access line")
    lines = log_lines(node.logs())
    requests = [line for line in lines if line["logger"] == "server.access"]
    events = [r for r in requests if r.get("route") == "/games/{game_id}/events"]
    assert events and events[-1]["method"] == "GET" and events[-1]["status"] == 200
    assert events[-1]["peer"] == "127.0.0.1" and isinstance(events[-1]["duration_ms"], float)
    unknown = [r for r in requests if r.get("status") == 404 and "route" not in r]
    assert unknown  # a path no route matches is written without any path
    sessions = [r for r in requests if r["msg"] == "websocket session"]
    assert sessions and sessions[-1]["route"] == "/games/{game_id}/ws"
    text = "\n".join(json.dumps(line) for line in requests)
    assert game_id not in text and "note=hello" not in text and "/no/such/page" not in text
    # uvicorn's own lines quoting a target are gone.
    assert not [line for line in lines if line["logger"] == "uvicorn.access"]
    assert not [line for line in lines if "WebSocket" in line["msg"] and line["logger"].startswith("uvicorn")]


def test_uvicorn_lines_quoting_a_target_are_dropped_and_any_query_string_is_cut() -> None:
    """What a uvicorn that still wrote its access lines (or a library logging a URL) would leak, does not."""
    root = logging.getLogger()
    kept = (root.handlers[:], root.level)
    levels = {name: logging.getLogger(name).level for name in ("uvicorn", "websockets")}
    stream = io.StringIO()
    try:
        setup("debug", stream)
        access = logging.getLogger("uvicorn.access")
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", f"/games?token={CANARY}", "1.1", 200)
        error = logging.getLogger("uvicorn.error")
        error.info('%s - "WebSocket %s" %s', "127.0.0.1:5", f"/{CANARY}/ws", "[accepted]")
        logging.getLogger("server.anything").warning("fetching %s", f"http://x/games/g?at={CANARY} now")
        logging.getLogger("server.anything").info("kept", extra={"url": f"/games/g?key={CANARY}"})
    finally:
        root.handlers[:], _ = kept
        root.setLevel(kept[1])
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    written = stream.getvalue()
    assert CANARY not in written
    lines = log_lines(written)
    assert [line["msg"] for line in lines] == ["fetching http://x/games/g?[query omitted] now", "kept"]
    assert lines[1]["url"] == "/games/g?[query omitted]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no query here", "no query here"),
        ("is it? yes", "is it? yes"),
        ('"GET /a?b=c&d=e HTTP/1.1"', '"GET /a?[query omitted] HTTP/1.1"'),
        ("ws://h/g/ws?token=x'", "ws://h/g/ws?[query omitted]'"),
    ],
)
def test_without_query_cuts_query_strings_only(text: str, expected: str) -> None:
    assert without_query(text) == expected
