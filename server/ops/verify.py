"""Integrity of a game's history: the hash chain, the versions, and the rules re-applied to every event.

`verify(lines)` takes the stored envelope bytes in order (as GET /games/{id}/events gives them, one per
line) and reports the first bad version, if any. Each placement event is checked by deciding again the
command it records on the state before it: a tampered bonus, seat or outcome is found even if whoever
tampered with it also rewrote the chain after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from domain import (
    ChairClaimed,
    ChairStolen,
    EndGame,
    Event,
    GameCreated,
    GameEnded,
    Place,
    PlacedBelowLine,
    Rejected,
    decide,
)
from domain.rules import doubles
from domain.vocabulary import DOUBLING_SKILL, MATERIAL_CHOICE, MATERIALS, RULES_VERSION, Material
from projections import Board, View, apply
from server.engine import envelope


class Report(msgspec.Struct, frozen=True):
    """What a verification found: `ok`, the number of envelopes, and the first bad version with why."""

    ok: bool
    envelopes: int
    bad_version: int | None = None
    problem: str | None = None
    view: View | None = None


def verify(lines: Sequence[bytes], live_view: View | None = None) -> Report:
    """Check a game's stored envelopes; compare the re-folded view with `live_view` when given."""
    board = Board()
    head = envelope.GENESIS
    game_id: str | None = None
    for index, line in enumerate(lines):
        version = index + 1
        try:
            item = envelope.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return _bad(version, f"unreadable envelope: {exc}", index)
        game_id = game_id or item.game_id
        problem = _envelope_problem(item, version, head, game_id)
        if problem is None:
            problem = _rule_problem(board, item.event, item.command_id or "", item.seat)
        if problem is not None:
            return _bad(version, problem, index)
        board = apply(board, item.event)
        head = envelope.chain_hash(line)
    if not lines:
        return Report(ok=False, envelopes=0, bad_version=1, problem="no envelopes: no such game")
    if live_view is not None and msgspec.json.encode(live_view) != msgspec.json.encode(board.view):
        return Report(ok=False, envelopes=len(lines), problem="the live view differs from the re-folded one")
    return Report(ok=True, envelopes=len(lines), view=board.view)


def _bad(version: int, problem: str, index: int) -> Report:
    return Report(ok=False, envelopes=index, bad_version=version, problem=problem)


def _envelope_problem(item: envelope.Envelope, version: int, head: str, game_id: str) -> str | None:
    if item.version != version:
        return f"envelope says version {item.version} at position {version}"
    if item.game_id != game_id:
        return f"envelope of game {item.game_id!r} in game {game_id!r}"
    if item.prev != head:
        return "hash chain broken: prev is not the hash of the envelope before"
    if (version == 1) != isinstance(item.event, GameCreated):
        return "GameCreated must be the first event and only the first"
    return None


def _rule_problem(board: Board, event: Event, command_id: str, seat: int | None) -> str | None:
    """Decide again the command an event records; None when the rules give exactly that event."""
    if isinstance(event, GameCreated):
        # Every later event is decided again with this verifier's rules: a game recorded under other
        # rules cannot be vouched for by them (and a rewritten rules_version must not pass unnoticed).
        if event.rules_version != RULES_VERSION:
            return (
                f"recorded under rules version {event.rules_version}; these are rules version {RULES_VERSION}"
            )
        return None
    command = _command_of(board, event, command_id or "verify")
    if command is None:
        return "the event names a space or seat the game does not have"
    if seat != command.seat:
        return f"envelope seat {seat} is not the event's seat {command.seat}"
    try:
        decided = decide(board.game, command)
    except Rejected as exc:
        return f"the rules reject what this event records ({exc.code}: {exc.message})"
    if decided != [event]:
        return f"the rules give {msgspec.json.encode(decided[0]).decode()}, not this event"
    return None


def _command_of(board: Board, event: Event, command_id: str) -> Place | EndGame | None:
    game = board.game
    if isinstance(event, GameEnded):
        return EndGame(seat=event.seat, id=_safe_id(command_id))
    assert not isinstance(event, GameCreated)
    space = game.layout.space(event.space) if game.layout is not None else None
    if space is None or not 0 <= event.seat < len(game.players):
        return None
    doubled = isinstance(event, ChairClaimed | ChairStolen) and event.doubled
    skill = DOUBLING_SKILL if doubled else 1
    consolation = "money"
    if isinstance(event, PlacedBelowLine) and "inspiration" in event.consolation:
        consolation = "inspiration"
    materials: tuple[Material, ...] | None = None
    if space.bonus.get(MATERIAL_CHOICE):
        gained = event.bonus if isinstance(event, ChairClaimed | ChairStolen) else {}
        factor = 2 if doubles(event.token, skill) else 1
        chosen = [m for m in MATERIALS for _ in range(gained.get(m, 0) - space.bonus.get(m, 0) * factor)]
        if not chosen:  # below the line: the choice was never used; any valid one decides the same
            needed = space.bonus[MATERIAL_CHOICE] * factor
            chosen = [MATERIALS[0]] * needed
        materials = tuple(chosen)
    return Place(
        seat=event.seat,
        id=_safe_id(command_id),
        token=event.token,
        space=event.space,
        skill=skill,
        consolation=consolation,  # type: ignore[arg-type]
        materials=materials,
    )


def _safe_id(command_id: str) -> str:
    return command_id if command_id else "verify"
