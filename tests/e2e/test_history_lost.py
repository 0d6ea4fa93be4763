"""A command id sent again after its envelopes were dropped from the game's stream (XDEL, XTRIM, as an
operator could) is answered `history_lost`, never an `accepted` naming versions the stream no longer holds;
an id whose envelopes are still there keeps its first answer. On a real redis-server, a real server and
real clients."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from orchestra_client import GameClient
from tests.support.e2e import PERF, REJECTION_KEYS, STRINGS, expect_accepted, new_game
from tests.support.redis import RedisProcess, command, stream_entries

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def assert_history_lost(answer: dict[str, Any], id: str, version: int, lost: str) -> None:
    assert set(answer) == REJECTION_KEYS, answer
    assert (answer["type"], answer["id"], answer["code"]) == ("rejected", id, "history_lost"), answer
    assert answer["version"] == version
    assert f"accepted as version {lost}" in answer["message"], answer


async def test_a_repeated_id_whose_envelopes_were_dropped_is_history_lost(
    start_server: Any, own_redis: RedisProcess
) -> None:
    server = start_server(own_redis.url)
    game_id, (token,) = await new_game(server.url, ["Ada"])
    async with await GameClient.connect(server.url, game_id, token, reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola", id="a-1"))
        expect_accepted(await ada.place(STRINGS, "cello", id="a-2"))
        kept = expect_accepted(await ada.place(PERF, "timpani", id="a-3"))
    client = redis.Redis.from_url(own_redis.url)
    key, commands = f"orchestra:{{{game_id}}}:events", f"orchestra:{{{game_id}}}:commands"
    try:
        # An operator deletes one entry, then trims the stream to its last.
        assert command(client, "XDEL", key, "0-2") == 1
        records_before = client.hgetall(commands)
        async with await GameClient.connect(server.url, game_id, token, reconnect=False) as ada:
            # The same body, which the rules would accept now: the store knows the id, not its envelopes.
            first = await ada.place(PERF, "viola", id="a-1")
            assert_history_lost(first, "a-1", 4, "2")
            # As docs/protocol.md's table of codes shows it.
            message = "this id was accepted as version 2, which the game's stream no longer holds"
            assert first["message"] == message
            assert command(client, "XTRIM", key, "MAXLEN", "1") == 2
            # Another body, which the rules refuse: the id is still looked up first.
            assert_history_lost(await ada.place(STRINGS, "oboe", id="a-2"), "a-2", 4, "3")
            # Sent again, the same answer: nothing was written in between.
            assert_history_lost(await ada.place(PERF, "viola", id="a-1"), "a-1", 4, "2")
            # An id whose envelope is still in the stream keeps its first answer.
            assert await ada.place(PERF, "viola", id="a-3") == kept
        assert [entry_id for entry_id, _ in stream_entries(client, key)] == [b"0-4"]
        assert client.hgetall(commands) == records_before
    finally:
        client.close()
    assert "Traceback" not in server.logs()
