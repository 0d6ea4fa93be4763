"""Helpers of the browser and bot tests: screenshots, bots, chairs on the page, a history's legality."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import msgspec

import domain
from orchestra_client import create_game
from orchestra_client.bots import BotResult, play_bot
from tests.support.waiting import until

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
SAVED: list[Path] = []
PLAYERS = ["Ada", "Ben", "Cy"]

# Each space's chair holders as the page shows them: data-chair-seat, or data-chair-seats on a rare space.
CHAIRS_JS = """() => Object.fromEntries([...document.querySelectorAll('#board [data-space]')].map(
    (e) => [e.dataset.space, e.dataset.chairSeats ?? e.dataset.chairSeat ?? null]))"""
# Each standard space's tokens below the line as the page shows them: their seats, oldest first.
BELOW_JS = """() => Object.fromEntries([...document.querySelectorAll('#board [data-space]')]
    .filter((e) => e.querySelector('.below'))
    .map((e) => [e.dataset.space,
                 [...e.querySelectorAll('.below .chip')].map((c) => Number(c.dataset.seat))]))"""
LOG_JS = """() => [...document.querySelectorAll('#log li')].map(
    (li) => ({version: Number(li.dataset.version), text: li.querySelector('.text').textContent}))"""


async def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot as test-artifacts/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    SAVED.append(path)
    print(f"screenshot: {path}")
    return path


async def new_game(url: str, players: list[str] | None = None, **options: Any) -> tuple[str, list[str]]:
    """Create a game; its id and the seat tokens in seat order."""
    created = await create_game(url, players or PLAYERS, **options)
    return created["game_id"], [seat["token"] for seat in created["seats"]]


async def play_bots(
    url: str,
    game_id: str,
    tokens: list[str],
    *,
    pace: tuple[float, float] = (0.0, 0.02),
    placements: int = 5,
    seed: int = 1,
) -> list[BotResult]:
    """Every seat's bot, together, until seat 0's bot ends the game."""
    bots = [
        play_bot(url, game_id, token, pace=pace, rng_seed=seed + seat, max_placements=placements)
        for seat, token in enumerate(tokens)
    ]
    return list(await asyncio.gather(*bots))


def chairs_in(view: dict[str, Any]) -> dict[str, str | None]:
    """What CHAIRS_JS must read on a page that shows `view`."""
    chairs: dict[str, str | None] = {}
    for space_id, held in view["spaces"].items():
        if held["kind"] == "rare":
            chairs[space_id] = " ".join(str(s["seat"]) for s in held["chairs"]) or None
        else:
            chairs[space_id] = None if held["chair"] is None else str(held["chair"]["seat"])
    return chairs


def below_in(view: dict[str, Any]) -> dict[str, list[int]]:
    """What BELOW_JS must read on a page that shows `view`."""
    return {
        space_id: [s["seat"] for s in held["below"]]
        for space_id, held in view["spaces"].items()
        if held["kind"] == "standard"
    }


async def wait_for_board(page: Any, view: dict[str, Any], timeout: float = 10.0) -> None:
    """Wait until the page's board shows the chairs and the tokens below the line of `view`."""
    await wait_for_chairs(page, view, timeout)
    await _wait_until_shown(page, BELOW_JS, below_in(view), f"{view['version']}, below the line", timeout)


async def wait_for_chairs(page: Any, view: dict[str, Any], timeout: float = 10.0) -> None:
    """Wait until the page's board shows the chairs of `view`; fail showing both when it does not."""
    await _wait_until_shown(page, CHAIRS_JS, chairs_in(view), str(view["version"]), timeout)


async def _wait_until_shown(page: Any, script: str, expected: object, where: str, timeout: float) -> None:
    shown: list[object] = [None]

    async def matches() -> bool:
        shown[0] = await page.evaluate(script)
        return shown[0] == expected

    try:
        # Each look is a round trip to the browser: fewer than the helper's default, on a busy machine.
        await until(matches, timeout, f"the board at version {where}", interval=0.05)
    except AssertionError:
        raise AssertionError(f"the board at version {where} differs: {shown[0]!r} != {expected!r}") from None


def words_expected(envelope: dict[str, Any], players: list[str]) -> list[str]:
    """Phrases the log line of `envelope` must contain: who did what, where."""
    event = envelope["event"]
    kind = event["type"]
    if kind == "GameCreated":
        return ["Game created for", *event["players"]]
    who = players[event["seat"]]
    if kind == "GameEnded":
        return [who, "ends the game"]
    verb = {"ChairClaimed": "chair with", "ChairStolen": "steals the", "PlacedBelowLine": "below the line"}
    phrases = [who, verb[kind]]
    if kind == "ChairStolen" and event["from_seat"] == event["seat"]:
        phrases = [who, "chair from their own token"]
    elif kind == "ChairStolen":
        phrases.append(f"from {players[event['from_seat']]}")
    gained = event.get("bonus") or event.get("consolation") or {}
    phrases += [f"+{amount} {resource.replace('_', ' ')}" for resource, amount in gained.items()]
    return phrases


def check_legal_history(envelopes: list[dict[str, Any]]) -> domain.Game:
    """Re-decide every recorded command from the events before it: each must give exactly its events.

    Returns the final state. Fails when any placement was illegal or resolved otherwise than the rules say.
    """
    events = [msgspec.convert(envelope["event"], domain.Event) for envelope in envelopes]
    assert isinstance(events[0], domain.GameCreated)
    state = domain.evolve(domain.Game(), events[0])
    layout = events[0].layout
    for index, event in enumerate(events[1:], start=2):
        command: domain.Command
        if isinstance(event, domain.GameEnded):
            command = domain.EndGame(seat=event.seat, id=f"x{index}")
        else:
            assert event.space in domain.legal_spaces(layout, event.token), event
            command = _placement_of(event, layout)
        decided = domain.decide(state, command)
        assert msgspec.to_builtins(decided) == [msgspec.to_builtins(event)], f"version {index}"
        state = functools.reduce(domain.evolve, decided, state)
    return state


def _placement_of(event: domain.PlacementEvent, layout: domain.Layout) -> domain.Place:
    """The command that made a placement event (skill 6 when doubled; the choices from the gains)."""
    doubled = getattr(event, "doubled", False)
    consolation = "money"
    materials: tuple[str, ...] | None = None
    if isinstance(event, domain.PlacedBelowLine):
        consolation = "inspiration" if "inspiration" in event.consolation else "money"
    else:
        space = layout.space(event.space)
        assert space is not None
        if "material_choice" in space.bonus:
            fixed = {k: v * (2 if doubled else 1) for k, v in space.bonus.items()}
            chosen: list[str] = []
            for material in ("wood", "metal", "animal"):
                chosen += [material] * (event.bonus.get(material, 0) - fixed.get(material, 0))
            materials = tuple(chosen)
    command = msgspec.convert(
        {
            "type": "place",
            "seat": event.seat,
            "id": "replayed",
            "token": msgspec.to_builtins(event.token),
            "space": event.space,
            "skill": 6 if doubled else 1,
            "consolation": consolation,
            "materials": materials,
        },
        domain.Command,
    )
    assert isinstance(command, domain.Place)
    return command
