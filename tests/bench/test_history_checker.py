"""The history checker (bench/history.py) on planted histories: a clean one passes, each anomaly is named."""

from __future__ import annotations

from bench.history import (
    Answered,
    ClientHistory,
    Closed,
    Fault,
    Received,
    Sent,
    StoredEnvelope,
    check,
    digest,
)

GAME = "g1"


def _stream(count: int, prefix: str = "c") -> list[StoredEnvelope]:
    return [
        StoredEnvelope(v, digest({"version": v, "command_id": f"{prefix}{v}"}), f"{prefix}{v}")
        for v in range(1, count + 1)
    ]


def _received(envelope: StoredEnvelope, at: float = 0.0) -> Received:
    return Received(envelope.version, envelope.digest, envelope.command_id, at)


def _player(stream: list[StoredEnvelope], level: str = "replica", name: str = "p0") -> ClientHistory:
    """A client that sent every command of `stream`, was told `accepted` for each, and received each."""
    history = ClientHistory(name, GAME, level)
    for index, envelope in enumerate(stream):
        assert envelope.command_id is not None
        at = float(index)
        history.records += [
            Sent(envelope.command_id, at),
            _received(envelope, at + 0.1),
            Answered(envelope.command_id, "accepted", envelope.version, at + 0.2),
        ]
    return history


def _spectator(stream: list[StoredEnvelope], name: str = "s0") -> ClientHistory:
    return ClientHistory(name, GAME, "replica", [_received(e) for e in stream])


def test_a_clean_history_has_no_anomaly() -> None:
    stream = _stream(6)
    verdict = check([_player(stream), _spectator(stream), _spectator(stream[:3], "late")], {GAME: stream})
    assert verdict.ok and verdict.anomalies == []
    assert verdict.accepted == 6
    assert verdict.lost_by_level == {} and verdict.lost_by_fault == {}


def test_an_acknowledged_command_missing_from_the_stream_is_a_loss_counted_per_level_and_fault() -> None:
    told = _stream(5)
    kept = told[:3]  # versions 4 and 5 acknowledged, then lost with their primary
    player = _player(told, level="replica")
    player.records.append(Closed(4001, 10.0))
    player.records += [_received(e) for e in kept]
    faults = [Fault("kill_master#1", 4.0, 6.0), Fault("kill_master#0", 1.0, 2.0)]
    verdict = check([player], {GAME: kept}, faults)
    assert verdict.kinds() == {"lost_acknowledged": 2}
    assert not verdict.ok
    assert verdict.lost_by_level == {"replica": 2}
    # version 4 was acknowledged at 3.2, before kill_master#1; version 5 at 4.2, while it was under way
    assert verdict.lost_by_fault == {"kill_master#1": 2}


def test_a_loss_is_charged_to_the_fault_under_way_else_the_next() -> None:
    told = _stream(5)
    player = _player(told)  # accepted at 0.2, 1.2, 2.2, 3.2, 4.2
    faults = [Fault("lag_kill#0", 2.0, 3.0), Fault("lag_kill#1", 3.5, 3.8)]
    verdict = check([player], {GAME: told[:1]}, faults)
    # 1.2 and 2.2: lag_kill#0 (next, then under way); 3.2: lag_kill#1 (next); 4.2: after every fault
    assert verdict.lost_by_fault == {"lag_kill#0": 2, "lag_kill#1": 1, "none": 1}


def test_a_loss_at_the_primary_level_is_named_but_tolerated() -> None:
    told = _stream(3)
    player = _player(told, level="primary")
    player.records += [Closed(4001), *(_received(e) for e in told[:2])]
    verdict = check([player], {GAME: told[:2]})
    assert verdict.kinds() == {"lost_acknowledged": 1}
    assert verdict.ok and verdict.lost_by_level == {"primary": 1} and verdict.lost_by_fault == {"none": 1}


def test_a_command_written_twice_is_duplicated() -> None:
    stream = _stream(3)
    twice = [*stream, StoredEnvelope(4, digest({"again": 1}), "c3")]
    verdict = check([_player(stream)], {GAME: twice})
    assert "duplicated" in verdict.kinds()
    assert not verdict.ok


def test_a_command_at_another_version_than_acknowledged_is_moved() -> None:
    stream = _stream(3)
    player = _player(stream)
    player.records = [r for r in player.records if not isinstance(r, Received)]
    player.records.append(Answered("c9", "accepted", 2, 9.0))
    shifted = [*stream, StoredEnvelope(4, digest({"v": 4}), "c9")]
    verdict = check([player], {GAME: shifted})
    assert verdict.kinds() == {"moved": 1}
    assert "c9" in verdict.anomalies[0].detail


def test_two_envelopes_for_one_version_without_4001_are_a_fork() -> None:
    stream = _stream(3)
    other = StoredEnvelope(3, digest({"forked": True}), "x3")
    spectator = _spectator([*stream, other])
    verdict = check([spectator], {GAME: stream})
    assert "fork" in verdict.kinds()


def test_two_envelopes_for_one_version_with_a_4001_between_are_no_fork() -> None:
    stream = _stream(3)
    lost = StoredEnvelope(3, digest({"lost": True}), "x3")
    spectator = ClientHistory("s", GAME, "replica", [*(_received(e) for e in stream[:2]), _received(lost)])
    spectator.records += [Closed(4001), *(_received(e) for e in stream)]
    verdict = check([spectator], {GAME: stream})
    assert verdict.anomalies == []


def test_a_history_that_left_the_stream_without_a_4001_is_not_a_prefix() -> None:
    stream = _stream(3)
    lost = StoredEnvelope(3, digest({"lost": True}), "x3")
    spectator = ClientHistory("s", GAME, "replica", [*(_received(e) for e in stream[:2]), _received(lost)])
    spectator.records.append(Closed(1012))  # a restart, not a 4001: the client keeps what it holds
    verdict = check([spectator], {GAME: stream})
    assert verdict.kinds() == {"not_prefix": 1}
    assert "version 3" in verdict.anomalies[0].detail


def test_a_history_past_the_stream_end_is_not_a_prefix() -> None:
    stream = _stream(4)
    verdict = check([_spectator(stream)], {GAME: stream[:2]})
    assert verdict.kinds()["not_prefix"] == 1


def test_a_version_skipped_is_a_gap() -> None:
    stream = _stream(4)
    verdict = check([_spectator([stream[0], stream[2], stream[3]])], {GAME: stream})
    assert verdict.kinds() == {"gap": 1}


def test_unavailable_for_a_written_command_is_counted_and_allowed_when_its_retry_is_accepted() -> None:
    stream = _stream(2)
    player = _player(stream)
    player.records.insert(1, Answered("c1", "unavailable", 0, 0.05))
    verdict = check([player], {GAME: stream})
    assert verdict.anomalies == [] and verdict.unavailable_written == 1


def test_unavailable_for_a_command_not_written_is_not_counted() -> None:
    stream = _stream(2)
    player = _player(stream)
    player.records += [Sent("c9", 5.0), Answered("c9", "unavailable", 0, 5.1)]
    verdict = check([player], {GAME: stream})
    assert verdict.anomalies == [] and verdict.unavailable_written == 0


def test_a_written_command_whose_retry_is_refused_is_named() -> None:
    stream = _stream(2)
    player = ClientHistory("p", GAME, "replica", [_received(e) for e in stream])
    player.records += [Answered("c2", "unavailable", 0, 1.0), Answered("c2", "illegal_space", 2, 2.0)]
    verdict = check([player], {GAME: stream})
    assert verdict.kinds() == {"retry_differs": 1} and verdict.unavailable_written == 1


def test_a_written_command_whose_retry_got_no_answer_is_no_anomaly() -> None:
    stream = _stream(2)
    player = ClientHistory("p", GAME, "replica", [_received(e) for e in stream])
    player.records += [Answered("c2", "unavailable", 0, 1.0), Answered("c2", "timeout", 0, 2.0)]
    player.records.append(Answered("c2", "closed 4001", 0, 3.0))
    verdict = check([player], {GAME: stream})
    assert verdict.anomalies == [] and verdict.unavailable_written == 1


def test_an_id_accepted_again_at_another_version_is_named() -> None:
    stream = _stream(3)
    player = _player(stream)
    player.records.append(Answered("c2", "accepted", 3, 9.0))  # the retry's answer is not the first one
    verdict = check([player], {GAME: stream})
    assert verdict.kinds() == {"retry_differs": 1}


def test_seconds_without_service_per_fault() -> None:
    stream = _stream(6)
    player = _player(stream)  # accepted answers at 0.2, 1.2, ... 5.2
    faults = [Fault("stop_primary#0", 1.5, 2.0), Fault("kill_node#1", 4.0, 4.1)]
    outage = check([player], {GAME: stream}, faults).outage_by_fault
    assert (
        round(outage["stop_primary#0"], 3) == 1.0
    )  # 1.5 -> 2.2, 2.2 -> 3.2, 3.2 -> 4.0 (cut at the next fault)
    assert round(outage["kill_node#1"], 3) == 1.0  # 4.0 -> 4.2 -> 5.2


def test_seconds_without_service_are_those_of_the_game_stalled_longest() -> None:
    stream = _stream(6)
    steady = _player(stream)  # an answer every second
    stalled = ClientHistory(
        "q", "g2", "replica", [Answered("q1", "accepted", 2, 0.5), Answered("q2", "accepted", 3, 4.5)]
    )
    outage = check(
        [steady, stalled], {GAME: stream, "g2": []}, [Fault("kill_master#0", 1.0, 2.0)]
    ).outage_by_fault
    assert round(outage["kill_master#0"], 3) == 3.5  # g2: 1.0 -> 4.5
