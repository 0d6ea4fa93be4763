"""server.ops.restore on the memory store: a game played by the engine comes back whole (its envelopes, its
credentials from the archive's signed trailer, and command records equal to those the engine wrote), and
the progress display of bulk commands on a terminal and off one."""

from __future__ import annotations

import io

import pytest

from domain import PerformanceToken, Place, RepairToken
from domain.messages import EndGame, TakeBack
from server.clock import utc_now
from server.engine.games import Games
from server.engine.signing import Keyring, Signer
from server.engine.trailer import trailer_credentials, trailer_line
from server.ops.progress import INTERRUPTED, Outcome, Progress
from server.ops.restore import RestoreError, Result, commands_of, created_micros, restore
from server.store import Appended
from server.store.memory import MemoryEventStore


async def _played(store: MemoryEventStore) -> tuple[Games, str]:
    games = Games(store)
    game_id = (await games.create(["Ada", "Ben", "Cy"])).game_id
    moves: list[Place | TakeBack | EndGame] = [
        Place(seat=0, id="a1", token=PerformanceToken("classical"), space="viola"),
        Place(seat=1, id="b1", token=PerformanceToken("classical"), space="viola"),
        TakeBack(seat=1, id="b-back"),
        Place(seat=1, id="b2", token=RepairToken("winds"), space="clarinet"),
        Place(seat=2, id="a1", token=PerformanceToken("baroque"), space="violin_bc"),  # another seat's id
        EndGame(seat=0, id="end"),
    ]
    for move in moves:
        await games.handle(game_id, move)
    return games, game_id


async def test_the_command_records_rebuilt_from_the_envelopes_are_those_the_engine_wrote() -> None:
    store = MemoryEventStore()
    _, game_id = await _played(store)
    lines = [record.data for record in await store.read(game_id)]
    written = store._games[game_id].commands
    assert commands_of(lines) == {key: (o.first, o.last) for key, o in written.items()}
    assert set(commands_of(lines)) == {"0:a1", "1:b1", "1:b-back", "1:b2", "2:a1", "0:end"}


async def test_an_archived_game_restores_whole_into_another_store_with_its_credentials() -> None:
    played = MemoryEventStore()
    games, game_id = await _played(played)
    records = await played.read(game_id)
    credentials = await played.credentials(game_id)
    signer = games.node.signer
    trailer = trailer_line(game_id, records, utc_now(), signer, credentials)
    assert trailer_credentials(trailer) == credentials
    lines = [*(record.data for record in records), trailer]

    target = MemoryEventStore()
    done = await restore(target, lines, keys=Keyring.of(signer))
    assert (done.result, done.ended, done.credentials, done.envelopes) == (Result.IMPORTED, True, True, 7)
    assert await target.read(game_id) == records
    assert await target.credentials(game_id) == credentials
    assert await target.outcome(game_id, "1:b2") == Appended(5, 5, duplicate=True)
    assert await target.live_games() == 0 and [g.game_id for g in await target.listed(10)] == [game_id]
    again = await restore(target, lines, keys=Keyring.of(signer))
    assert again.result is Result.PRESENT

    # Another key's signatures, or one envelope lost: refused, and nothing is written.
    empty = MemoryEventStore()
    with pytest.raises(RestoreError) as refused:
        await restore(empty, lines, keys=Keyring.of(Signer.generate()))
    assert refused.value.bad_version == 1
    with pytest.raises(RestoreError) as refused:
        await restore(empty, [*lines[:3], *lines[4:]], keys=Keyring.of(signer))
    assert refused.value.bad_version == 4
    assert await empty.games() == []


def test_an_envelope_time_is_its_creation_score_in_microseconds() -> None:
    assert created_micros("1970-01-01T00:00:01.250Z") == 1_250_000
    assert created_micros("not a time") is None


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_redraws_one_bar_and_keeps_reports_above_it() -> None:
    err, out = _Terminal(), io.StringIO()
    now = [0.0]
    progress = Progress("archive", done_word="archived", stream=err, out=out, clock=lambda: now[0])
    progress.begin(4)
    for name in ("g1", "g2"):
        now[0] += 1
        progress.step(name, Outcome.DONE, "archived")
    progress.report("g3: not archived: broken")
    now[0] += 1
    progress.step("g3", Outcome.FAILED, "not archived: broken")
    assert "\r\x1b[Karchive [" in err.getvalue() and "] 3/4, 1 failed, 1.0/s, 1 s left" in err.getvalue()
    assert "g1" not in err.getvalue()  # a terminal shows the bar, not a line a game
    progress.interrupted = True
    assert progress.finish() == INTERRUPTED
    assert out.getvalue().splitlines() == [
        "g3: not archived: broken",
        "archive: 2 archived, 0 skipped, 1 failed, of 4 in 3.0 s (1.0/s); interrupted with 1 not done: "
        "run the same command again to resume",
    ]
    assert err.getvalue().endswith("\n")


def test_progress_elsewhere_writes_one_plain_line_an_item() -> None:
    err, out = io.StringIO(), io.StringIO()
    progress = Progress("verify", done_word="verified", stream=err, out=out)
    progress.begin(2)
    progress.step("a.ndjson", Outcome.DONE, "6 envelopes verified (ended)")
    progress.step("b.ndjson", Outcome.SKIPPED, "skipped")
    assert err.getvalue().splitlines() == [
        "[1/2] a.ndjson: 6 envelopes verified (ended)",
        "[2/2] b.ndjson: skipped",
    ]
    assert progress.finish() == 0
    assert out.getvalue().startswith("verify: 1 verified, 1 skipped, 0 failed, of 2 in ")
