"""The records' pure folds: a game's result row equals what its final view says, and players and
standings follow the documented rules."""

from __future__ import annotations

import random

import pytest

from domain import STANDARD, Event, GameCreated, GameEnded, NextGame, Rank, Score, SeatTokenReissued
from projections.records import (
    GameResult,
    PlayerRecord,
    SeatResult,
    game_result,
    name_key,
    players,
    standings,
    step,
)
from tests.records.games import events, expected_seats, play


def dated(log: list[Event]) -> list[tuple[int, str, Event]]:
    return [(n, f"2026-01-01T00:00:{n:02d}Z", event) for n, event in enumerate(log, 1)]


@pytest.mark.parametrize("seed", range(60))
def test_a_game_result_equals_what_its_final_view_says(seed: int) -> None:
    rng = random.Random(seed)
    log, standing = events(play(rng, f"g{seed}"))
    result = game_result(dated(log))
    assert result is not None
    created = log[0]
    assert isinstance(created, GameCreated)
    assert result.game_id == f"g{seed}"
    assert result.private == (created.spectators == "token")
    assert result.layout == "standard"
    assert result.placements == standing
    assert result.version == len(log)
    assert result.created_at == "2026-01-01T00:00:01Z"
    assert result.ended_at == f"2026-01-01T00:00:{len(log):02d}Z"
    assert [(s.seat, s.name, s.prestige, s.rank) for s in result.seats] == expected_seats(log)


def test_a_game_not_ended_has_no_result_yet() -> None:
    log, _ = events(play(random.Random(1), "g", end=False))
    assert game_result(dated(log)) is None


def test_events_before_the_game_was_created_fold_to_nothing() -> None:
    log, _ = events(play(random.Random(2), "g"))
    assert step(None, 2, "t", log[-1]) is None


def test_the_fold_resumes_from_a_stored_progress() -> None:
    log, _ = events(play(random.Random(3), "g"))
    whole = game_result(dated(log))
    progress = None
    for version, at, event in dated(log)[:5]:
        progress = step(progress, version, at, event)
    for version, at, event in dated(log)[5:]:
        progress = step(progress, version, at, event)
    assert progress is not None and progress.result == whole


def result(game_id: str, ended_at: str, *seats: tuple[str | None, int, int | None]) -> GameResult:
    return GameResult(
        game_id=game_id,
        layout="standard",
        private=False,
        created_at=ended_at,
        ended_at=ended_at,
        placements=1,
        version=3,
        seats=tuple(SeatResult(seat=n, name=s[0], prestige=s[1], rank=s[2]) for n, s in enumerate(seats)),
    )


def test_names_are_compared_ignoring_case_and_width() -> None:
    assert name_key("Ada") == name_key(" ADA ") == name_key("Ａｄａ")
    assert name_key("Ada") != name_key("Adam")


def test_players_count_games_wins_with_ties_and_prestige_of_ranked_seats_only() -> None:
    results = [
        result("a", "2026-01-01", ("Ada", 6, 1), ("Ben", 6, 1), ("Cy", 0, 3)),
        result("b", "2026-01-02", ("ada", 3, 2), ("Ben", 9, 1), (None, 0, None)),
        result("c", "2026-01-03", ("Cy", 0, None)),  # closed: not played
    ]
    table = players(results)
    assert set(table) == {"ada", "ben", "cy"}
    assert table["ada"] == PlayerRecord("ada", 2, 1, 4.5, 6, "2026-01-02")
    assert table["ben"] == PlayerRecord("Ben", 2, 2, 7.5, 9, "2026-01-02")
    assert table["cy"] == PlayerRecord("Cy", 1, 0, 0.0, 0, "2026-01-01")


def test_standings_order_by_wins_then_average_and_share_a_place_on_both_equal() -> None:
    rows = [
        PlayerRecord("Dee", 3, 1, 4.0, 6, "x"),
        PlayerRecord("Ben", 2, 2, 5.0, 6, "x"),
        PlayerRecord("ada", 2, 2, 5.0, 6, "x"),
        PlayerRecord("Cy", 2, 2, 7.0, 9, "x"),
    ]
    assert [(place, r.name) for place, r in standings(rows)] == [
        (1, "Cy"),
        (2, "ada"),
        (2, "Ben"),
        (4, "Dee"),
    ]


def test_a_tie_for_first_is_a_win_for_each_seat_sharing_it() -> None:
    log: list[Event] = [
        GameCreated(game_id="t", players=("Ada", "Ben"), layout=STANDARD),
        GameEnded(
            seat=0,
            scores=(Score(0, (), 0, {}), Score(1, (), 0, {})),
            ranking=(Rank(0, 1, 0), Rank(1, 1, 0)),
        ),
    ]
    done = game_result([(1, "a", log[0]), (2, "b", log[1])])
    assert done is not None
    assert {r.wins for r in players([done]).values()} == {1}


def test_events_that_change_no_result_only_move_the_version() -> None:
    log, _ = events(play(random.Random(4), "g"))
    before = game_result(dated(log))
    more = [*log, SeatTokenReissued(seat=0, credential="0" * 64), NextGame(game_id="g2")]
    progress = None
    for version, at, event in dated(more):
        progress = step(progress, version, at, event)
    assert progress is not None and progress.result == before and progress.version == len(more)
