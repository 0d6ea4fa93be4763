"""The JavaScript client (clients/js/): its Node tests against live servers, and its types under tsc.

The servers are real `orchestra serve` processes on the session's Redis (the wall tests' on one of its
own); the Node tests (node's own test runner, clients/js/test/*.test.js) get their URLs from the
environment, and a small control endpoint of this test to restart one of them (close 1012), damage a
game's stream (close 1011), or make the store lose a game's last envelopes (close 4001). Without Node
20+ or without clients/js/node_modules (`npm ci` there), these tests skip saying so (and fail under CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import redis

from tests.support.logs import logged
from tests.support.redis import RedisProcess, lose_after
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "js"
# Each of these must have run and passed: a test lost from the suite is noticed here.
EXPECTED_TESTS = {
    "createGame makes a game with its seats, and a private one with a watch token",
    "createGame rejects with the wire code and the HTTP status",
    "getEvents, getView at a version and getLegal read what the server holds",
    "describeToken and nameOf put ids in words",
    "applyDelta extends the view it fits and refuses one it does not",
    "connect as a player and as a spectator: role, seat, version and view",
    "a private game: its watch token makes a spectator; no token is refused with 1008, not retried",
    "place and endGame resolve to accepted, or reject with the wire code",
    "the view stays equal to GET /games/{id} after every event, with deltas and with whole views",
    "a resume point past the game's version is answered by a rejection without a command",
    "a dropped connection resumes with since: nothing missed or repeated, unanswered commands answered once",
    "a server restart (1012) is resumed from where each client was",
    "1013 (a game full of connections) is retried until there is room",
    "1011 (the game's history damaged) is final: no retry, unanswered commands rejected",
    "4001 (the store lost envelopes) resumes from 0: the history again as the stream holds it",
    "presence: a player and a spectator see each other, as getPresence does, and getView stays the view",
    "applyDelta cuts a list where a take-back's addition starts and gives the chair back",
    "takeBack: the game as before the placement, every view equals GET /games/{id}, lastPlacement follows",
    "takeBack is refused with the wire code: cannot_take_back, forbidden, stale_version, game_over",
    "applyWallChanges retires, adds first, changes only the named fields, and moves a game that ends",
    "connectWall keeps each game equal to GET /games/{id}, and after a drop starts from a new wall frame",
    "connectWall holds a page of the wall and more() adds the next, a page at a time",
    "open seats: takeSeat names a seat once, placements wait for a full table, closeSeat ends the wait",
    "an open table: openTables lists it, joinGame takes the lowest open seat, reissueToken ends a seat's "
    "link with 4003",
    "playAgain and nextGame start one next game; every connection gets next_game with its token",
    "verifyEnvelope holds for a real server's envelopes: history, accepted and live, batches across games",
    "verifyEnvelope names what was altered: the event, the path, the root, the checkpoint, the key",
    "verifyEnvelope checks each checkpoint once per keys object",
    "verifyEnvelope checks envelopes signed alone, a retired key's dates, and says 'not signed'",
}


def _damage(url: str, game_id: str, version: int) -> None:
    """Append an envelope that does not decode at `version`, as whoever can write to Redis could."""
    client = redis.Redis.from_url(url)
    try:
        client.xadd(f"orchestra:{{{game_id}}}:events", {"e": b'{"not": "an envelope"}'}, id=f"0-{version}")
    finally:
        client.close()


class Control(ThreadingHTTPServer):
    """POST /restart: SIGTERM the restartable server and start it again on its port; POST
    /damage?game=ID&version=N: damage that game's stream; POST /lose?game=ID&version=N&key=K: the
    store loses what followed version N, and the command K (as a Redis failover can). Answers once
    done."""

    def __init__(
        self,
        restart: Callable[[], None],
        damage: Callable[[str, int], None],
        lose: Callable[[str, int, str], None],
    ) -> None:
        self.restart, self.damage, self.lose = restart, damage, lose

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
                parts = urlsplit(self.path)
                query = {key: values[0] for key, values in parse_qs(parts.query).items()}
                try:
                    if parts.path == "/restart":
                        restart()
                    elif parts.path == "/damage":
                        damage(query["game"], int(query["version"]))
                    elif parts.path == "/lose":
                        lose(query["game"], int(query["version"]), query["key"])
                    else:
                        self.send_error(404)
                        return
                except Exception as exc:  # the Node test shows it
                    self.send_error(500, repr(exc))
                    return
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@pytest.fixture
def control(
    start_server: Callable[..., ServerProcess], redis_url: str, own_redis: RedisProcess
) -> Iterator[tuple[Control, dict[str, ServerProcess]]]:
    started = {
        "main": start_server(),
        "small": start_server(max_connections_per_game=2, wall_page_games=2),
        "restartable": start_server(),
        # A wall of its own (its Redis holds only the games of the wall tests) that the test address may
        # fill: the games the other tests create stay off it, so that a new game is on the first page.
        "wall": start_server(own_redis.url, wall_creator_share=1.0),
    }
    lock = threading.Lock()

    def restart() -> None:
        with lock:
            old = started["restartable"]
            port = urlsplit(old.url).port
            old.terminate()  # SIGTERM: every client is closed with 1012
            started["restartable"] = start_server(port=port)

    server = Control(
        restart,
        lambda game_id, version: _damage(redis_url, game_id, version),
        lambda game_id, version, key: lose_after(redis_url, game_id, version, [key]),
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, started
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.logs_warnings  # the Node tests damage a stream and make the store lose a write: logged
def test_the_node_tests_pass_against_live_servers(
    node: str, control: tuple[Control, dict[str, ServerProcess]]
) -> None:
    server, started = control
    env = {
        **os.environ,
        "ORCHESTRA_TEST_URL": started["main"].url,
        "ORCHESTRA_TEST_SMALL_URL": started["small"].url,
        "ORCHESTRA_TEST_RESTARTABLE_URL": started["restartable"].url,
        "ORCHESTRA_TEST_WALL_URL": started["wall"].url,
        "ORCHESTRA_TEST_CONTROL_URL": server.url,
    }
    files = sorted(str(path.relative_to(CLIENT)) for path in (CLIENT / "test").glob("*.test.js"))
    ran = subprocess.run(
        [node, "--test", "--test-reporter=tap", *files],
        cwd=CLIENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output[-6000:]
    passed = set(re.findall(r"^\s*ok \d+ - (.+?)\s*$", ran.stdout, re.MULTILINE))
    failed = re.findall(r"^\s*not ok \d+ - (.+?)\s*$", ran.stdout, re.MULTILINE)
    assert not failed, output[-6000:]
    missing = EXPECTED_TESTS - {name.strip() for name in passed}
    assert not missing, f"these Node tests did not pass: {sorted(missing)}\n{output[-3000:]}"
    assert re.search(r"^# fail 0$", ran.stdout, re.MULTILINE), output[-3000:]
    everything = "".join(node.logs() for node in started.values())
    assert logged(everything, "damaged game: a stored envelope cannot be read")
    assert logged(everything, "the stream no longer holds what this node folded: game read again")


def test_the_types_compile_with_a_typed_use_of_the_library(node: str) -> None:
    tsc = CLIENT / "node_modules" / ".bin" / "tsc"
    for project in ("tsconfig.json", "tsconfig.bare.json"):
        ran = subprocess.run(
            [str(tsc), "-p", project], cwd=CLIENT, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, f"{project}:\n{ran.stdout}{ran.stderr}"


def test_the_types_catch_a_mistake(node: str, tmp_path: Path) -> None:
    """tsc really checks usage.ts: the same file with one of its expected errors removed fails."""
    usage = (CLIENT / "test" / "usage.ts").read_text()
    broken = usage.replace("  // @ts-expect-error: an era the rules do not have\n", "", 1)
    assert broken != usage
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "usage.ts").write_text(broken)
    for name in ("orchestra.d.ts", "orchestra.js", "package.json"):
        shutil.copy(CLIENT / name, tmp_path / name)
    (tmp_path / "node_modules").symlink_to(CLIENT / "node_modules")
    shutil.copy(CLIENT / "tsconfig.json", tmp_path / "tsconfig.json")
    tsc = CLIENT / "node_modules" / ".bin" / "tsc"
    ran = subprocess.run(
        [str(tsc), "-p", "tsconfig.json"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode != 0 and '"modern"' in ran.stdout, ran.stdout


async def test_the_server_serves_the_library_and_its_types(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        script = await http.get("/client/orchestra.js")
        types = await http.get("/client/orchestra.d.ts")
    assert script.status_code == 200 and types.status_code == 200
    assert script.content == (CLIENT / "orchestra.js").read_bytes()
    assert types.content == (CLIENT / "orchestra.d.ts").read_bytes()
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.headers["x-typescript-types"] == "/client/orchestra.d.ts"
    assert script.headers["access-control-allow-origin"] == "*"
    assert "export async function connect(" in script.text
