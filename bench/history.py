"""The history checker of `python -m bench faults`: what every client was told, judged against the stream
each game kept. Pure: records in, a verdict out.

The rules (issue 42):

- every `accepted` command is in its game's final stream exactly once, its last envelope at the version
  it was acknowledged at (`lost_acknowledged`, `duplicated`, `moved`);
- no client received two different envelopes for one version without a 4001 between them (`fork`);
- every client's history is a prefix of the final stream, or ends in a 4001 after which it is again
  (`not_prefix`, and `gap` for a version skipped or received twice in one stretch);
- an `unavailable` answer for a command that was in fact written is counted, not an anomaly, as long as
  no later answer for its id says otherwise, and an id accepted twice is accepted at one version
  (`retry_differs`);
- lost acknowledged commands are counted per acknowledgement level and per fault (the fault under way at
  the acknowledgement, else the next: a write is lost when its primary dies before a replica has it).

Losses at a level listed in `tolerated_levels` (by default `primary`, which promises no more: see
docs/operations.md) are still named and counted, but do not fail the verdict.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

HISTORY_CHANGED = 4001
NO_FAULT = "none"


def digest(envelope: Mapping[str, Any]) -> str:
    """A stable digest of an envelope as received (its JSON with sorted keys)."""
    return hashlib.sha256(msgspec.json.encode(envelope, order="sorted")).hexdigest()[:32]


@dataclass(frozen=True)
class Sent:
    """A command frame sent, at `at` seconds."""

    command_id: str
    at: float


@dataclass(frozen=True)
class Answered:
    """A command's answer: `outcome` is `accepted` or the rejection's code; `envelopes`: how many the
    accepted answer carried."""

    command_id: str
    outcome: str
    version: int
    at: float
    envelopes: int = 1


@dataclass(frozen=True)
class Received:
    """An envelope received: its version, digest and command id."""

    version: int
    digest: str
    command_id: str | None
    at: float = 0.0


@dataclass(frozen=True)
class Closed:
    """The connection closed with `code` (None: dropped without a close frame)."""

    code: int | None
    at: float = 0.0


Record = Sent | Answered | Received | Closed


@dataclass
class ClientHistory:
    """Everything one client of one game saw, in order; `level` is its nodes' acknowledgement level."""

    client: str
    game_id: str
    level: str
    records: list[Record] = field(default_factory=list)


@dataclass(frozen=True)
class StoredEnvelope:
    """An envelope of a game's final stream."""

    version: int
    digest: str
    command_id: str | None


@dataclass(frozen=True)
class Fault:
    """A fault of the schedule: what it was and when it began and ended (seconds)."""

    name: str
    start: float
    end: float


@dataclass(frozen=True)
class Anomaly:
    """One broken rule: its kind, where, and in words; `tolerated` when its level promises no better."""

    kind: str
    game_id: str
    client: str | None
    detail: str
    tolerated: bool = False


@dataclass
class Verdict:
    """The checker's answer: the anomalies found and the figures counted."""

    anomalies: list[Anomaly]
    accepted: int
    unavailable_written: int
    lost_by_level: dict[str, int]
    lost_by_fault: dict[str, int]
    outage_by_fault: dict[str, float]

    @property
    def ok(self) -> bool:
        """No anomaly beyond the tolerated ones."""
        return not any(not a.tolerated for a in self.anomalies)

    def kinds(self) -> Counter[str]:
        """How many anomalies of each kind."""
        return Counter(a.kind for a in self.anomalies)

    def summary(self) -> dict[str, Any]:
        """The verdict as JSON-ready data (the first anomalies of each kind in words)."""
        examples: dict[str, list[str]] = defaultdict(list)
        for anomaly in self.anomalies:
            if len(examples[anomaly.kind]) < 5:
                examples[anomaly.kind].append(f"{anomaly.game_id} {anomaly.client or ''}: {anomaly.detail}")
        return {
            "ok": self.ok,
            "accepted": self.accepted,
            "unavailable_written": self.unavailable_written,
            "anomalies": dict(self.kinds()),
            "examples": dict(examples),
            "lost_by_level": self.lost_by_level,
            "lost_by_fault": self.lost_by_fault,
            "outage_seconds_by_fault": self.outage_by_fault,
        }


def check(
    clients: Iterable[ClientHistory],
    streams: Mapping[str, Sequence[StoredEnvelope]],
    faults: Sequence[Fault] = (),
    tolerated_levels: frozenset[str] = frozenset({"primary"}),
) -> Verdict:
    """Judge every client's history against the final streams (`streams`: game id -> envelopes)."""
    histories = list(clients)
    anomalies: list[Anomaly] = []
    lost_by_level: Counter[str] = Counter()
    lost_by_fault: Counter[str] = Counter()
    accepted_ids: dict[tuple[str, str], tuple[ClientHistory, Answered]] = {}
    unavailable_written = 0
    for history in histories:
        stream = streams.get(history.game_id, ())
        anomalies += _check_received(history, stream)
        for answer in (r for r in history.records if isinstance(r, Answered)):
            if answer.outcome != "accepted":
                continue
            _, first = accepted_ids.setdefault((history.game_id, answer.command_id), (history, answer))
            if first.version != answer.version:
                anomalies.append(
                    Anomaly(
                        "retry_differs",
                        history.game_id,
                        history.client,
                        f"command {answer.command_id} accepted at version {first.version}, "
                        f"then at {answer.version}",
                    )
                )
        unavailable_written += _unavailable_written(history, stream, anomalies)
    for (game_id, _), (history, answer) in accepted_ids.items():
        stream = streams.get(game_id, ())
        found = _acknowledged(history, answer, stream, tolerated_levels)
        if found is None:
            continue
        anomalies.append(found)
        if found.kind == "lost_acknowledged":
            lost_by_level[history.level] += 1
            lost_by_fault[_fault_after(faults, answer.at)] += 1
    return Verdict(
        anomalies=anomalies,
        accepted=len(accepted_ids),
        unavailable_written=unavailable_written,
        lost_by_level=dict(lost_by_level),
        lost_by_fault=dict(lost_by_fault),
        outage_by_fault=outages(histories, faults),
    )


def _acknowledged(
    history: ClientHistory, answer: Answered, stream: Sequence[StoredEnvelope], tolerated: frozenset[str]
) -> Anomaly | None:
    versions = [e.version for e in stream if e.command_id == answer.command_id]
    where = f"command {answer.command_id} accepted at version {answer.version}"
    if not versions:
        return Anomaly(
            "lost_acknowledged",
            history.game_id,
            history.client,
            f"{where}: not in the final stream",
            tolerated=history.level in tolerated,
        )
    if len(versions) > answer.envelopes or versions != list(range(versions[0], versions[0] + len(versions))):
        return Anomaly("duplicated", history.game_id, history.client, f"{where}: in the stream at {versions}")
    if versions[-1] != answer.version:
        return Anomaly("moved", history.game_id, history.client, f"{where}: in the stream at {versions}")
    return None


def _check_received(history: ClientHistory, stream: Sequence[StoredEnvelope]) -> list[Anomaly]:
    """Forks, and stretches (between 4001s) that are not the final stream's."""
    found: list[Anomaly] = []
    final = {e.version: e.digest for e in stream}
    stretches: list[list[Received]] = [[]]
    for record in history.records:
        if isinstance(record, Received):
            stretches[-1].append(record)
        elif isinstance(record, Closed) and record.code == HISTORY_CHANGED:
            stretches.append([])
    seen: dict[int, str] = {}
    for index, stretch in enumerate(stretches):
        if index:
            seen = {}
        for received in stretch:
            held = seen.setdefault(received.version, received.digest)
            if held != received.digest:
                found.append(
                    Anomaly(
                        "fork",
                        history.game_id,
                        history.client,
                        f"two envelopes for version {received.version} without a 4001 between them",
                    )
                )
        found += _stretch_gaps(history, stretch)
    last = stretches[-1]
    for received in last:
        if final.get(received.version) != received.digest:
            state = "not in" if received.version not in final else "not that of"
            found.append(
                Anomaly(
                    "not_prefix",
                    history.game_id,
                    history.client,
                    f"the envelope received at version {received.version} is {state} the final stream, "
                    "and no 4001 followed",
                )
            )
            break
    return found


def _stretch_gaps(history: ClientHistory, stretch: list[Received]) -> list[Anomaly]:
    for before, after in zip(stretch, stretch[1:], strict=False):
        if after.version != before.version + 1:
            return [
                Anomaly(
                    "gap",
                    history.game_id,
                    history.client,
                    f"version {after.version} received after {before.version}",
                )
            ]
    return []


def _unavailable_written(history: ClientHistory, stream: Sequence[StoredEnvelope], out: list[Anomaly]) -> int:
    written = {e.command_id for e in stream if e.command_id is not None}
    answers: dict[str, list[Answered]] = defaultdict(list)
    for record in history.records:
        if isinstance(record, Answered):
            answers[record.command_id].append(record)
    count = 0
    for command_id, given in answers.items():
        if command_id not in written:
            continue
        for index, answer in enumerate(given):
            if answer.outcome != "unavailable":
                continue
            count += 1
            later = [
                a.outcome for a in given[index + 1 :] if a.outcome != "unavailable" and not _unanswered(a)
            ]
            if later and later[0] != "accepted":
                out.append(
                    Anomaly(
                        "retry_differs",
                        history.game_id,
                        history.client,
                        f"command {command_id} was written, yet its retry was answered {later[0]}",
                    )
                )
    return count


def _unanswered(answer: Answered) -> bool:
    """A record of no answer: the send timed out, or the session ended first (nothing the server said)."""
    return answer.outcome == "timeout" or answer.outcome.startswith("closed")


def _fault_after(faults: Sequence[Fault], at: float) -> str:
    """The fault a loss of a write acknowledged at `at` is charged to: the one under way then, else the
    next to begin (a write is lost when its primary dies before a replica has it)."""
    following = [f for f in faults if f.end >= at]
    return min(following, key=lambda f: f.start).name if following else NO_FAULT


def outages(histories: Sequence[ClientHistory], faults: Sequence[Fault]) -> dict[str, float]:
    """Per fault, the longest time a game went without an accepted answer, from the fault's start to the
    next fault's (a fault stalls the games of one master, not all)."""
    by_game: dict[str, list[float]] = defaultdict(list)
    for history in histories:
        for r in history.records:
            if isinstance(r, Answered) and r.outcome == "accepted":
                by_game[history.game_id].append(r.at)
    ordered = sorted(faults, key=lambda f: f.start)
    result: dict[str, float] = {}
    for index, fault in enumerate(ordered):
        following = ordered[index + 1].start if index + 1 < len(ordered) else None
        result[fault.name] = max(
            (_longest_gap(sorted(times), fault, following) for times in by_game.values()), default=0.0
        )
    return result


def _longest_gap(times: list[float], fault: Fault, following: float | None) -> float:
    until = following if following is not None else (times[-1] if times else fault.end)
    inside = [t for t in times if fault.start <= t <= until]
    marks = [fault.start, *inside]
    if not inside:
        marks.append(max(until, fault.end))
    return max(b - a for a, b in zip(marks, marks[1:], strict=False))
