"""A Redis that lost acknowledged appends, on real servers and real clients.

Two `orchestra serve` nodes on one Redis. The first node's players and a spectator play two placements;
the store then loses the second (as a Redis failing over to a replica it had not reached does: its
entry and its command record go), and a player on the second node places another event at its version.
The first node must not write after the line it lost: its next command is refused by the store, the
node reads the game again and closes its connections with 4001, and the clients come back to the game
as the stream holds it, history included. The stream keeps one unbroken signed chain.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest

from orchestra_client import GameClient
from orchestra_client.session import HISTORY_CHANGED
from server.engine.signing import Keyring, public_key_from_text
from server.ops.verify import verify
from tests.support.e2e import expect_accepted, new_game
from tests.support.logs import logged
from tests.support.redis import lose_after
from tests.support.servers import ServerProcess

# The store losing a write is what the module provokes: the first node warns as it reads the game again.
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.logs_warnings]

REPAIR = {"kind": "repair", "family": "winds"}


async def stream_of(url: str, game_id: str) -> list[bytes]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        answer = await http.get(f"/games/{game_id}/events")
        answer.raise_for_status()
        return answer.content.splitlines()


async def keys_of(*urls: str) -> Keyring:
    found = []
    for url in urls:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            listed: dict[str, Any] = (await http.get("/signing-keys")).json()
        found += [public_key_from_text(key["public_key"]) for key in listed["keys"]]
    return Keyring(found)


async def test_clients_of_a_node_whose_store_lost_a_write_come_back_to_the_game_the_stream_holds(
    start_server: Callable[..., ServerProcess], redis_url: str
) -> None:
    first, second = start_server(), start_server()
    game_id, tokens = await new_game(first.url, ["Ada", "Ben", "Cy"])
    async with (
        await GameClient.connect(first.url, game_id, tokens[0]) as ada,
        await GameClient.connect(first.url, game_id, tokens[1]) as ben,
        await GameClient.connect(first.url, game_id) as watcher,
    ):
        assert expect_accepted(await ada.place(REPAIR, "oboe"))["version"] == 2
        lost = expect_accepted(await ben.place(REPAIR, "oboe"))
        assert lost["version"] == 3
        await watcher.wait_for_version(3)

        lose_after(redis_url, game_id, 2, [f"1:{lost['id']}"])

        async with await GameClient.connect(second.url, game_id, tokens[2], reconnect=False) as cy:
            assert cy.version == 2
            assert (
                expect_accepted(await cy.place({"kind": "performance", "era": "baroque"}, "violin_bc"))[
                    "version"
                ]
                == 3
            )

        # Decided after the lost line: refused by the store, decided again on the stream, sent again by
        # the client after its resume (the same id), and accepted after the second node's version 3.
        assert expect_accepted(await ada.place(REPAIR, "oboe"))["version"] == 4

        lines = await stream_of(first.url, game_id)
        report = verify(lines, keys=await keys_of(first.url, second.url))
        assert report.ok and report.envelopes == 4, report.problem
        stream = [msgspec.json.decode(line) for line in lines]
        assert stream[2]["seat"] == 2  # Cy's version 3, not Ben's lost one

        for client in (ada, ben, watcher):
            await client.wait_for_version(4)
            assert client.reconnects >= 1
            assert client.closed_with is not None and client.closed_with[0] == HISTORY_CHANGED
            assert client.envelopes == stream  # the whole history again, the lost envelope gone
            assert client.view is not None and client.view["version"] == 4
        assert watcher.view == msgspec.json.decode(msgspec.json.encode(report.view)) == ada.view

    async with httpx.AsyncClient(base_url=first.url, timeout=10) as http:
        metrics = (await http.get("/metrics")).text
    assert re.search(r"^orchestra_history_changed_total 1\.0$", metrics, re.MULTILINE), metrics[-2000:]
    read_again = "the stream no longer holds what this node folded: game read again"
    assert logged(first.logs(), read_again, game_id=game_id)
