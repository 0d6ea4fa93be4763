"""Random games for the records' tests, played through the rules, and a result computed from the view."""

from __future__ import annotations

import functools
import random

import domain
from domain import (
    STANDARD,
    CloseSeat,
    CreateGame,
    EndGame,
    InstrumentToken,
    PerformanceToken,
    Place,
    RepairToken,
    TakeBack,
    TakeSeat,
    Token,
    decide,
    evolve,
    legal_spaces,
)
from domain.vocabulary import ERAS, FAMILIES
from projections import render
from server.protocol.envelope import GENESIS, Envelope, chain_hash, encode

NAMES = ("Ada", "Ben", "Cy", "Dee", "Eve", "ÉLODIE")
TOKENS: tuple[Token, ...] = (
    *(PerformanceToken(era=era) for era in ERAS),
    *(RepairToken(family=family) for family in FAMILIES),
    *{InstrumentToken(instrument=space.instrument) for space in STANDARD.spaces},
)


def play(rng: random.Random, game_id: str, *, end: bool = True) -> list[domain.Command]:
    """The commands of a random game (open seats taken or closed, placements, take-backs, an end)."""
    seats = rng.randint(1, 4)
    names = rng.sample(NAMES, seats)
    players: list[str | None] = [None if rng.random() < 0.3 else name for name in names]
    spectators = "token" if rng.random() < 0.25 else "public"
    commands: list[domain.Command] = [
        CreateGame(game_id=game_id, players=tuple(players), spectators=spectators)  # type: ignore[arg-type]
    ]
    for seat, name in enumerate(players):
        if name is None:
            if seat > 0 and rng.random() < 0.3:
                commands.append(CloseSeat(target=seat, id=f"close-{seat}"))
            else:  # a name in another case: the records compare names as the name rules do
                commands.append(TakeSeat(seat=seat, id=f"take-{seat}", name=names[seat].lower()))
    for n in range(rng.randint(0, 25)):
        if rng.random() < 0.1:
            commands.append(TakeBack(seat=rng.randrange(seats), id=f"back-{n}"))
            continue
        token = rng.choice(TOKENS)
        space = rng.choice(legal_spaces(STANDARD, token))
        commands.append(Place(seat=rng.randrange(seats), id=f"p-{n}", token=token, space=space))
    if end:
        commands.append(EndGame(seat=0, id="end"))
    return commands


def events(commands: list[domain.Command]) -> tuple[list[domain.Event], int]:
    """The events the rules append for `commands` (refused ones skipped), and the placements standing."""
    state = domain.Game()
    log: list[domain.Event] = []
    standing = 0
    for command in commands:
        try:
            new = decide(state, command)
        except domain.Rejected:
            continue
        state = functools.reduce(evolve, new, state)
        log += new
        if isinstance(command, Place):
            standing += 1
        elif isinstance(command, TakeBack):
            standing -= 1
    return log, standing


def expected_seats(log: list[domain.Event]) -> list[tuple[int, str | None, int, int | None]]:
    """Each seat's (seat, name, prestige, rank) from the final view alone: a rank is one more than the
    count of seats that took part with more prestige; a closed seat has none."""
    view = render(functools.reduce(evolve, log, domain.Game()))
    taking_part = [p.seat for p in view.players if not p.closed]
    prestige = {score.seat: score.prestige for score in view.scores}
    rows = []
    for player in view.players:
        rank = None
        if not player.closed:
            rank = 1 + sum(1 for other in taking_part if prestige[other] > prestige[player.seat])
        rows.append((player.seat, player.name, prestige[player.seat], rank))
    return rows


def stored(game_id: str, log: list[domain.Event], day: str = "2026-01-01") -> list[bytes]:
    """`log` as a game's stored envelopes (unsigned), each linked to the one before it, a second apart."""
    lines: list[bytes] = []
    head = GENESIS
    for n, event in enumerate(log, 1):
        at = f"{day}T00:{n // 60:02d}:{n % 60:02d}.000Z"
        lines.append(encode(Envelope(game_id, n, at, None, None, event, prev=head)))
        head = chain_hash(lines[-1])
    return lines
