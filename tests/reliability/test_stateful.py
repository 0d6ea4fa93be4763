"""A stateful property test against a live server: random sequences of valid, invalid and duplicated
commands, spectators' commands, disconnects and resumes, across two players and a spectator per game.

Invariants: every command gets exactly one answer (echoing its id); an accepted id keeps its first answer;
the stream holds exactly the accepted commands, once each; every client's history (envelopes as received,
not deduplicated) equals the stream; the server stays up.

Bounded for CI (10 games of 30 steps, derandomized); ORCHESTRA_TEST_SOAK=N runs N games of 100 steps
with fresh randomness, for longer local runs. The machine is synchronous: each step runs its coroutine on
an event loop of its own thread, where the clients live.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections import Counter
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from orchestra_client import GameClient
from tests.support.reliability import assert_each_applied_once, new_game, placement, stream_of
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

T = TypeVar("T")
SOAK = int(os.environ.get("ORCHESTRA_TEST_SOAK", "0") or 0)
STEP_TIMEOUT = 30.0

# Frames the server must refuse, each with the code it must give (the id is added per send).
INVALID: list[tuple[dict[str, Any], str]] = [
    ({"type": "place", "token": {"kind": "repair", "family": "strings"}, "space": "oboe"}, "illegal_space"),
    (
        {"type": "place", "token": {"kind": "performance", "era": "classical"}, "space": "nowhere"},
        "bad_request",
    ),
    (
        {"type": "place", "token": {"kind": "performance", "era": "classical"}, "space": "viola", "x": 1},
        "bad_request",
    ),
    (
        {
            "type": "place",
            "token": {"kind": "performance", "era": "classical"},
            "space": "viola",
            "skill": 11,
        },
        "bad_request",
    ),
    ({"type": "place", "token": {"kind": "violin"}, "space": "viola"}, "bad_request"),
    ({"type": "dance"}, "bad_request"),
    (
        {
            "type": "place",
            "token": {"kind": "performance", "era": "classical"},
            "space": "viola",
            "expected_version": 0,
        },
        "stale_version",
    ),
]


class Loop:
    """An event loop on a thread of its own, for the clients of the synchronous state machine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stateful-loop", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(STEP_TIMEOUT)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def loop() -> Iterator[Loop]:
    running = Loop()
    try:
        yield running
    finally:
        running.close()


class Table(RuleBasedStateMachine):
    """One game per example: players 0 and 1, spectator 2."""

    url = ""
    server: Any = None
    runner: Loop

    def __init__(self) -> None:
        super().__init__()
        self.game_id, tokens = self.runner.run(new_game(self.url, ["Ada", "Ben"]))
        self.clients: list[GameClient] = [
            self.runner.run(GameClient.connect(self.url, self.game_id, token, since=0))
            for token in [*tokens, None]
        ]
        self.rng = random.Random(0)
        self.count = 0
        self.sent: list[tuple[int, dict[str, Any]]] = []  # (client, frame) of every command sent
        self.sends: list[Counter[str]] = [Counter() for _ in self.clients]
        self.accepted: dict[tuple[int, str], int] = {}
        self.first_answers: dict[tuple[int, str], dict[str, Any]] = {}
        self.ended = False

    def _send(self, who: int, frame: dict[str, Any]) -> dict[str, Any]:
        client = self.clients[who]
        self.sends[who][frame["id"]] += 1
        answer: dict[str, Any] = self.runner.run(client.send(frame, timeout=15))
        assert answer["type"] in ("accepted", "rejected") and answer["id"] == frame["id"], answer
        self.sent.append((who, frame))
        key = (who, frame["id"])
        if answer["type"] == "accepted":
            first = self.first_answers.setdefault(key, answer)
            assert (answer["version"], answer["events"]) == (first["version"], first["events"])
            self.accepted[key] = answer["version"]
        return answer

    def _id(self) -> str:
        self.count += 1
        return f"m-{self.count}"

    @rule(who=st.integers(0, 1), seed=st.integers(0, 2**16))
    def place_valid(self, who: int, seed: int) -> None:
        answer = self._send(who, placement(random.Random(seed), self._id()))
        expected = {"game_over"} if self.ended else {"accepted"}
        assert answer.get("code", "accepted") in expected, answer

    @rule(who=st.integers(0, 1), case=st.sampled_from(INVALID))
    def send_invalid(self, who: int, case: tuple[dict[str, Any], str]) -> None:
        frame, code = case
        answer = self._send(who, {**frame, "id": self._id()})
        assert answer["type"] == "rejected"
        # game_over comes before the rule-level codes (never before bad_request).
        assert answer["code"] == (code if not self.ended or code == "bad_request" else "game_over"), answer

    @precondition(lambda self: bool(self.sent))
    @rule(pick=st.integers(0, 10_000))
    def send_again(self, pick: int) -> None:
        who, frame = self.sent[pick % len(self.sent)]
        answer = self._send(who, frame)
        if (who, frame["id"]) in self.first_answers:
            assert answer["type"] == "accepted"  # checked against the first answer in _send

    @rule(seed=st.integers(0, 2**16))
    def spectator_commands(self, seed: int) -> None:
        answer = self._send(2, placement(random.Random(seed), self._id()))
        assert (answer["type"], answer["code"]) == ("rejected", "forbidden")

    @rule(who=st.integers(0, 2))
    def drop_and_resume(self, who: int) -> None:
        client = self.clients[who]
        before = client.reconnects

        async def cut() -> None:
            await client.drop()
            await until(lambda: client.reconnects != before, 15, "the client resumed")

        self.runner.run(cut())

    @precondition(lambda self: not self.ended)
    @rule()
    def end_the_game(self) -> None:
        if self.rng.random() < 0.5:  # half as often as a rule of its own would run
            return
        answer = self._send(0, {"type": "end_game", "id": self._id()})
        assert answer["type"] == "accepted"
        self.ended = True

    @invariant()
    def histories_equal_the_stream(self) -> None:
        stream = self.runner.run(stream_of(self.url, self.game_id))
        assert_each_applied_once(stream, self.accepted)
        for client in self.clients:
            self.runner.run(client.wait_for_version(len(stream), timeout=15))
            assert client.envelopes == stream
        assert self.server.process.poll() is None

    @invariant()
    def one_answer_per_command(self) -> None:
        for who, client in enumerate(self.clients):
            answers = Counter(f["id"] for f in client.received if f.get("type") in ("accepted", "rejected"))
            assert answers == self.sends[who]

    def teardown(self) -> None:
        for client in self.clients:
            self.runner.run(client.close())


def test_random_command_sequences_keep_every_history_equal_to_the_stream(
    module_server: Any, loop: Loop
) -> None:
    Table.url, Table.server, Table.runner = module_server.url, module_server, loop
    run_state_machine_as_test(
        Table,
        settings=settings(
            max_examples=SOAK or 10,
            stateful_step_count=100 if SOAK else 30,
            deadline=None,
            derandomize=not SOAK,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert "Traceback" not in module_server.logs()
