"""Demo bots: players that place random legal tokens over the real protocol, at a human pace.

    result = await play_bot(base_url, game_id, seat_token, rng_seed=1, max_placements=12)

A bot reads the game's layout from its first envelope (`GameCreated`), then, until the game ends or its
quota is done, waits a random time within `pace`, picks a random token kind and token, and places it in a
random space where the domain's own rules let that token go (`domain.legal_spaces`), naming Rare Strings
materials when the placement needs them. The bot in seat 0 ends the game once its quota is done.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import msgspec

from domain import Layout, Token, legal_spaces
from domain.rules import materials_needed
from domain.vocabulary import CONSOLATIONS, ERAS, FAMILIES, MATERIALS
from orchestra_client.http import get_events
from orchestra_client.session import GameClient

# Rejections a bot shrugs off and goes on after: the server was busy, or the command lost a race.
TOLERATED = frozenset({"rate_limited", "unavailable", "stale_version"})
# A bot gives up after this many tolerated rejections in a row: the server is not coming back soon.
MAX_REJECTIONS_IN_A_ROW = 20


@dataclass
class BotResult:
    """What a bot did: its seat, placements accepted, rejection codes met, and whether it ended the game."""

    seat: int | None
    placed: int = 0
    rejections: list[str] = field(default_factory=list)
    ended_game: bool = False
    game_over: bool = False


def random_placement(layout: Layout, rng: random.Random) -> dict[str, Any]:
    """A random legal `place` frame (without id) on `layout`: token, space, skill, consolation, materials."""
    while True:
        kind = rng.choice(("instrument", "performance", "repair"))
        if kind == "instrument":
            raw: dict[str, str] = {"kind": kind, "instrument": rng.choice(layout.instruments)}
        elif kind == "performance":
            raw = {"kind": kind, "era": rng.choice(ERAS)}
        else:
            raw = {"kind": kind, "family": rng.choice(FAMILIES)}
        token = msgspec.convert(raw, Token)
        spaces = legal_spaces(layout, token)
        if spaces:
            break
    space_id = rng.choice(spaces)
    skill = rng.randint(1, 8)
    frame: dict[str, Any] = {
        "token": raw,
        "space": space_id,
        "skill": skill,
        "consolation": rng.choice(sorted(CONSOLATIONS)),
    }
    space = layout.space(space_id)
    needed = materials_needed(space, token, skill) if space is not None else 0
    if needed:
        frame["materials"] = [rng.choice(MATERIALS) for _ in range(needed)]
    return frame


async def read_layout(base_url: str, game_id: str, token: str | None = None) -> Layout:
    """The layout of a game, from its `GameCreated` envelope. Raises: httpx.HTTPStatusError, ValueError."""
    envelopes = await get_events(base_url, game_id, token=token)
    first = envelopes[0]["event"] if envelopes else {}
    if first.get("type") != "GameCreated":
        raise ValueError(f"game {game_id}: the first envelope is not GameCreated")
    return msgspec.convert(first["layout"], Layout)


async def play_bot(
    base_url: str,
    game_id: str,
    token: str,
    *,
    pace: tuple[float, float] = (0.5, 1.5),
    rng_seed: int | None = None,
    max_placements: int = 12,
) -> BotResult:
    """Play random legal placements for the seat of `token` until the game ends or the quota is done.

    The bot of seat 0 ends the game after its quota. Raises: ConnectionRefused (bad token or game),
    httpx.HTTPStatusError (the layout could not be read), RuntimeError (a legal placement was refused
    as illegal, or the server refused MAX_REJECTIONS_IN_A_ROW placements in a row).
    """
    rng = random.Random(rng_seed)
    layout = await read_layout(base_url, game_id, token)
    async with await GameClient.connect(base_url, game_id, token, view=False) as game:
        result = BotResult(seat=game.seat)
        in_a_row = 0
        while result.placed < max_placements and not _ended(game):
            await asyncio.sleep(rng.uniform(*pace) + min(0.05 * in_a_row, 1.0))
            if _ended(game):
                break
            frame = random_placement(layout, rng)
            answer = await game.place(frame.pop("token"), frame.pop("space"), **frame)
            if answer["type"] == "accepted":
                result.placed += 1
                in_a_row = 0
                continue
            result.rejections.append(answer["code"])
            in_a_row += 1
            if in_a_row >= MAX_REJECTIONS_IN_A_ROW:
                raise RuntimeError(f"bot of seat {game.seat}: {in_a_row} rejections in a row: {answer}")
            if answer["code"] == "game_over":
                result.game_over = True
                break
            if answer["code"] == "limit_reached":
                break
            if answer["code"] not in TOLERATED:
                raise RuntimeError(f"bot of seat {game.seat}: a legal placement was refused: {answer}")
        if result.game_over or _ended(game):
            result.game_over = True
        elif game.seat == 0:
            answer = await game.end_game()
            result.ended_game = answer["type"] == "accepted"
            result.game_over = result.ended_game or answer.get("code") == "game_over"
        return result


def _ended(game: GameClient) -> bool:
    """Whether the game has ended (GameEnded is always a game's last envelope)."""
    return bool(game.envelopes) and game.envelopes[-1]["event"]["type"] == "GameEnded"
