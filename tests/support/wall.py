"""Helpers of the wall tests: what the wall must show of a game, from its view as GET /games/{id} gives it."""

from __future__ import annotations

from typing import Any

# The fields of a game on the wall that follow from its view (the layout is the GameCreated's).
FOLLOWED = ("version", "ended", "players", "chairs", "prestige")


def wall_of(view: dict[str, Any]) -> dict[str, Any]:
    """A game's wall summary (its fields of FOLLOWED) as its view says it must be."""
    chairs: dict[str, list[int]] = {}
    for space_id, held in view["spaces"].items():
        if held["kind"] == "rare":
            chairs[space_id] = [seated["seat"] for seated in held["chairs"]]
        else:
            chairs[space_id] = [] if held["chair"] is None else [held["chair"]["seat"]]
    prestige = [0] * len(view["players"])
    for score in view["scores"]:
        prestige[score["seat"]] = score["prestige"]
    return {
        "version": view["version"],
        "ended": view["ended"],
        "players": [player["name"] for player in view["players"]],
        "chairs": chairs,
        "prestige": prestige,
    }


def followed(game: dict[str, Any]) -> dict[str, Any]:
    """A wall game's fields of FOLLOWED."""
    return {key: game[key] for key in FOLLOWED}
