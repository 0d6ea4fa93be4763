"""The published message schema (GET /schema.json): JSON Schema 2020-12, generated from the msgspec types.

The document is portable: standard keywords only, patterns in the subset ECMA-262 and Python share (see
domain.patterns), so strict validators (ajv in strict mode) compile it as served. Its entry points are
`$defs/ClientFrame`, `$defs/ServerFrame`, `$defs/Game` (GET /games/{id}) and `$defs/WallFeedFrame` (the
frames of the wall feed, /wall/ws); the root accepts a game socket's frame of either direction.

msgspec's output is reshaped in three ways:
- a tagged union (msgspec writes `anyOf` with OpenAPI's `discriminator`, which is no JSON Schema keyword)
  becomes a named definition holding a plain `oneOf`, whose branches each fix their tag with `const`;
- the server frame union is written here: the three shapes of an `events` frame share one tag, so they
  are told apart by which view field they carry (`EventsFrame`: `view`, `DeltaFrame`: `view_delta`,
  `HistoryFrame`: neither);
- fields always present in what the server sends are required even where Python gives them a default.
"""

from __future__ import annotations

import functools
from typing import Any, get_args

import msgspec

from domain import Event
from projections import View, ViewDelta
from server.protocol import frames, wall
from server.protocol.envelope import Envelope

DIALECT = "https://json-schema.org/draft/2020-12/schema"
REF = "#/$defs/{name}"


class EventsFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes of one or more consecutive commands, with the whole view after the last (live frames of a
    `view: "full"` connection)."""

    envelopes: list[Envelope]
    view: View


class DeltaFrame(msgspec.Struct, frozen=True, tag_field="type", tag="events"):
    """Envelopes of one or more consecutive commands, with what they changed in the view (live frames of a
    `view: "delta"` connection, the default)."""

    envelopes: list[Envelope]
    view_delta: ViewDelta


# The schema's twin of each wire frame whose Python type holds a view as a struct (see frames.py).
TWINS: dict[str, type[msgspec.Struct]] = {"EventsFrame": frames.EventsFrame, "DeltaFrame": frames.DeltaFrame}
CLIENT_FRAMES: tuple[type[msgspec.Struct], ...] = get_args(frames.ClientFrame)
SERVER_FRAMES = (
    frames.Welcome,
    frames.Accepted,
    frames.RejectedFrame,
    EventsFrame,
    DeltaFrame,
    frames.HistoryFrame,
    frames.PresenceFrame,
    frames.NextGameFrame,
)
# The definition named for each tagged union, by one of its members (a union without one stays inline).
UNIONS = {
    "InstrumentToken": "Token",
    "GameCreated": "Event",
    "ChairSpaceView": "SpaceView",
    "ChairSpaceAdded": "SpaceAdded",
}
# GET /games/{id}: the view now, with the presence now beside its fields (presence is no part of the view,
# which is a fold of the game's events alone).
GAME: dict[str, Any] = {
    "description": (
        "GET /games/{id}: the view now, and beside its fields who is at the table now (and, once an ended "
        "game has it, its next game)."
    ),
    "allOf": [
        {"$ref": REF.format(name="View")},
        {
            "type": "object",
            "properties": {
                "presence": {"$ref": REF.format(name="Presence")},
                "next_game": {"type": "string", "description": "the ended game's next game (play again)"},
            },
            "required": ["presence"],
        },
    ],
}
# The definitions a client starts from: the frames of both directions, and the body of GET /games/{id}.
ENTRY_POINTS = ("ClientFrame", "ServerFrame", "Game", "WallFeedFrame")
# Fields that a frame of that shape never carries: the three `events` shapes exclude one another.
ABSENT = {"EventsFrame": ("view_delta",), "DeltaFrame": ("view",), "HistoryFrame": ("view", "view_delta")}
# Fields with a default in Python that every envelope carries all the same (only `key` and `sig` may be
# missing, from envelopes written before signing).
ALWAYS = {"Envelope": ("schema", "prev")}


@functools.cache
def document() -> bytes:
    """The whole schema, encoded."""
    return msgspec.json.encode(build())


def build() -> dict[str, Any]:
    """The schema as a JSON object."""
    types: tuple[Any, ...] = (*CLIENT_FRAMES, *SERVER_FRAMES, Envelope, Event, View, ViewDelta)
    types += (frames.Presence,)  # GET /games/{id}'s (see GAME)
    types += wall.WALL_FRAMES  # the wall feed's (/wall/ws)
    _, components = msgspec.json.schema_components(types, ref_template=REF)
    unions: dict[str, Any] = {}  # the named unions met on the way
    defs: dict[str, Any] = {name: _portable(schema, unions) for name, schema in components.items()}
    defs.update(unions)
    for name, fields in ABSENT.items():
        defs[name]["properties"].update(dict.fromkeys(fields, False))
    for name, fields in ALWAYS.items():
        defs[name]["required"] = [*defs[name]["required"], *fields]
    defs["ClientFrame"] = _one_of(t.__name__ for t in CLIENT_FRAMES)
    defs["ServerFrame"] = _one_of(t.__name__ for t in SERVER_FRAMES)
    defs["Game"] = GAME
    defs["WallFeedFrame"] = _one_of(t.__name__ for t in wall.WALL_FRAMES)
    return {
        "$schema": DIALECT,
        "title": "Orchestra wire protocol v1",
        "description": (
            "Validate a frame a client sends against #/$defs/ClientFrame, a frame the server sends against "
            "#/$defs/ServerFrame; envelopes (#/$defs/Envelope, also the lines of GET /games/{id}/events), "
            "views (#/$defs/View, also GET /games/{id}?at=N) and view deltas (#/$defs/ViewDelta) have their "
            "own definitions, and so has GET /games/{id} (#/$defs/Game: the view and the presence now). A "
            "frame of the wall feed (/wall/ws) validates against #/$defs/WallFeedFrame. The root accepts a "
            "frame of either direction of a game's websocket."
        ),
        "oneOf": [{"$ref": REF.format(name="ClientFrame")}, {"$ref": REF.format(name="ServerFrame")}],
        "$defs": dict(sorted(defs.items())),
    }


def _one_of(names: Any) -> dict[str, Any]:
    return {"oneOf": [{"$ref": REF.format(name=name)} for name in names]}


def _portable(node: Any, unions: dict[str, Any]) -> Any:
    """`node` with its tagged unions as references to named `oneOf` definitions (added to `unions`) and its
    tags as `const`."""
    if isinstance(node, list):
        return [_portable(item, unions) for item in node]
    if not isinstance(node, dict):
        return node
    if "discriminator" in node:
        union = {"oneOf": node["anyOf"]}
        members = [branch["$ref"].rsplit("/", 1)[1] for branch in node["anyOf"]]
        name = next((UNIONS[member] for member in members if member in UNIONS), None)
        if name is None:
            return union
        if unions.setdefault(name, union) != union:
            raise ValueError(f"two different unions would be named {name}")
        return {"$ref": REF.format(name=name)}
    if list(node) == ["enum"] and len(node["enum"]) == 1:
        return {"const": node["enum"][0]}
    return {key: _portable(value, unions) for key, value in node.items()}
