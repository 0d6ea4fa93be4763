"""The published schema's shape, without a server: portable keywords and patterns, nothing left open, every
reference defined, the twins of the `events` frames true to the wire types, and the envelope's fields."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, get_args

import msgspec
import pytest

from domain import patterns
from server.protocol import frames, schema
from server.protocol.codes import CODES
from server.protocol.envelope import Envelope

DOCUMENT: dict[str, Any] = json.loads(schema.document())
DEFS: dict[str, Any] = DOCUMENT["$defs"]
# The subset of regular expressions JSON Schema recommends for interoperability, as far as the ids need it:
# anchors, literal characters, character classes of literals and ranges, counts.
PORTABLE = re.compile(r"\^(?:(?:\[[^\]\\^]+\]|[A-Za-z0-9_])(?:\{\d+(?:,\d+)?\}|[+*?])?)+\$")


def walk(node: Any, path: str = "#") -> Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{path}/{index}")


def test_the_root_is_2020_12_with_both_entry_points() -> None:
    assert DOCUMENT["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert DOCUMENT["oneOf"] == [{"$ref": "#/$defs/ClientFrame"}, {"$ref": "#/$defs/ServerFrame"}]
    assert "properties" not in DOCUMENT
    client = [b["$ref"] for b in DEFS["ClientFrame"]["oneOf"]]
    assert client == [f"#/$defs/{frame.__name__}" for frame in get_args(frames.ClientFrame)]
    assert client[:3] == ["#/$defs/Hello", "#/$defs/PlaceFrame", "#/$defs/EndGameFrame"]
    assert [b["$ref"] for b in DEFS["ServerFrame"]["oneOf"]] == [
        f"#/$defs/{name}"
        for name in (
            "Welcome",
            "Accepted",
            "RejectedFrame",
            "EventsFrame",
            "DeltaFrame",
            "HistoryFrame",
            "PresenceFrame",
            "NextGameFrame",
        )
    ]


def test_no_keyword_outside_json_schema_and_no_open_schema() -> None:
    for path, node in walk(DOCUMENT):
        if isinstance(node, dict):
            assert "discriminator" not in node, path
            # `{}` accepts anything: every value the server sends has a shape.
            assert node or path.endswith(("/properties", "/$defs")), path


def test_every_reference_is_defined_and_every_definition_is_reachable_from_an_entry_point() -> None:
    refs = {node["$ref"] for _, node in walk(DOCUMENT) if isinstance(node, dict) and "$ref" in node}
    assert {ref.removeprefix("#/$defs/") for ref in refs} <= set(DEFS)
    reached, todo = set(), list(schema.ENTRY_POINTS)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [
                n["$ref"].removeprefix("#/$defs/")
                for _, n in walk(DEFS[name])
                if isinstance(n, dict) and "$ref" in n
            ]
    assert reached == set(DEFS)


def test_patterns_are_portable_and_mean_what_the_server_checks() -> None:
    found = {node["pattern"] for _, node in walk(DOCUMENT) if isinstance(node, dict) and "pattern" in node}
    assert found == {patterns.COMMAND_ID, patterns.SPACE_ID}
    for pattern in found:
        assert PORTABLE.fullmatch(pattern), pattern
        assert "\\" not in pattern and "(?" not in pattern


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "place", "id": "c-1\n", "token": {"kind": "repair", "family": "winds"}, "space": "oboe"},
        {"type": "end_game", "id": "c-1\n"},
    ],
)
def test_a_command_id_with_a_final_line_break_is_refused_as_ecma_262_refuses_it(
    frame: dict[str, Any],
) -> None:
    """Python's `$` matches before a final line break; the frame refuses it as the schema does."""
    assert re.search(patterns.COMMAND_ID, "c-1\n")  # what msgspec's pattern check alone lets through
    with pytest.raises(
        msgspec.ValidationError, match=r"regex '\^\[A-Za-z0-9\._:-\]\{1,64\}\$' - at `\$\.id`"
    ):
        frames.decode_frame(json.dumps(frame))


def test_tags_are_constants_in_every_tagged_definition() -> None:
    assert DEFS["Hello"]["properties"]["type"] == {"const": "hello"}
    assert DEFS["InstrumentToken"]["properties"]["kind"] == {"const": "instrument"}
    assert DEFS["GameEnded"]["properties"]["type"] == {"const": "GameEnded"}
    assert {json.dumps(b) for b in DEFS["Token"]["oneOf"]} == {
        json.dumps({"$ref": f"#/$defs/{n}Token"}) for n in ("Instrument", "Performance", "Repair")
    }


def test_raw_json_fields_name_what_they_hold() -> None:
    assert DEFS["Welcome"]["properties"]["view"] == {"$ref": "#/$defs/View"}
    assert DEFS["Accepted"]["properties"]["events"]["items"] == {"$ref": "#/$defs/Envelope"}
    for name in ("EventsFrame", "DeltaFrame", "HistoryFrame"):
        assert DEFS[name]["properties"]["envelopes"]["items"] == {"$ref": "#/$defs/Envelope"}
    assert DEFS["EventsFrame"]["properties"]["view"] == {"$ref": "#/$defs/View"}
    assert DEFS["DeltaFrame"]["properties"]["view_delta"] == {"$ref": "#/$defs/ViewDelta"}


def test_the_three_events_shapes_exclude_one_another() -> None:
    props = {name: DEFS[name]["properties"] for name in ("EventsFrame", "DeltaFrame", "HistoryFrame")}
    assert props["EventsFrame"]["view_delta"] is False and props["DeltaFrame"]["view"] is False
    assert props["HistoryFrame"]["view"] is False and props["HistoryFrame"]["view_delta"] is False


@pytest.mark.parametrize("name", sorted(schema.TWINS))
def test_each_twin_has_the_fields_and_tag_of_its_wire_frame(name: str) -> None:
    twin, wire = getattr(schema, name), schema.TWINS[name]
    assert msgspec.structs.fields(twin) and [f.name for f in msgspec.structs.fields(twin)] == [
        f.name for f in msgspec.structs.fields(wire)
    ]
    assert twin.__struct_config__.tag == wire.__struct_config__.tag
    assert DEFS[name]["required"] == ["type", *(f.name for f in msgspec.structs.fields(wire))]


def test_the_envelope_requires_every_field_but_the_signature() -> None:
    fields = [f.name for f in msgspec.structs.fields(Envelope)]
    assert set(DEFS["Envelope"]["required"]) == set(fields) - {"key", "sig", "proof"}
    assert {"schema", "prev"} <= set(DEFS["Envelope"]["required"])


def test_a_rejection_code_is_one_of_the_codes() -> None:
    assert DEFS["RejectedFrame"]["properties"]["code"] == {"type": "string", "enum": list(CODES)}


def test_a_tagged_union_is_named_by_a_member_or_else_stays_inline() -> None:
    def union(*names: str) -> dict[str, Any]:
        refs = [{"$ref": f"#/$defs/{name}"} for name in names]
        return {"anyOf": refs, "discriminator": {"propertyName": "kind", "mapping": {}}}

    unions: dict[str, Any] = {}
    assert schema._portable(union("A", "B"), unions) == {"oneOf": union("A", "B")["anyOf"]} and unions == {}
    assert schema._portable(union("ChairSpaceView", "B"), unions) == {"$ref": "#/$defs/SpaceView"}
    assert unions == {"SpaceView": {"oneOf": union("ChairSpaceView", "B")["anyOf"]}}
    with pytest.raises(ValueError, match="SpaceView"):
        schema._portable(union("ChairSpaceView", "C"), unions)


def test_take_back_is_a_client_frame_and_its_event_an_event() -> None:
    assert {"$ref": "#/$defs/TakeBackFrame"} in DEFS["ClientFrame"]["oneOf"]
    assert DEFS["TakeBackFrame"]["properties"]["type"] == {"const": "take_back"}
    assert DEFS["TakeBackFrame"]["required"] == ["type", "id"]
    assert DEFS["TakeBackFrame"]["additionalProperties"] is False
    assert {"$ref": "#/$defs/PlacementTakenBack"} in DEFS["Event"]["oneOf"]
    assert set(DEFS["PlacementTakenBack"]["required"]) == {"type", "seat", "version"}


def test_get_games_id_is_the_view_with_the_presence_beside_its_fields() -> None:
    """The view stays the events' alone; GET /games/{id} adds `presence`, the presence frame's fields."""
    assert "presence" not in DEFS["View"]["properties"]
    view, beside = DEFS["Game"]["allOf"]
    assert view == {"$ref": "#/$defs/View"}
    assert beside["properties"]["presence"] == {"$ref": "#/$defs/Presence"}
    assert set(beside["properties"]) == {"presence", "next_game"}  # next_game: an ended game's, if any
    assert beside["required"] == ["presence"]
    frame = DEFS["PresenceFrame"]["properties"]
    assert frame["type"] == {"const": "presence"}
    assert {key: frame[key] for key in ("seats", "spectators")} == DEFS["Presence"]["properties"]
    assert DEFS["SeatPresence"]["required"] == ["seat", "online"]


def test_the_wall_feed_is_an_entry_point_whose_changes_carry_only_what_changed() -> None:
    """The wall feed's frames (`wall`, `wall_changes`, `wall_page`, and the client's `wall_more`) validate
    against WallFeedFrame; a change requires only its game id and never carries a null (a field that did
    not change is left out); every frame the server sends says the wall's total."""
    assert "WallFeedFrame" in schema.ENTRY_POINTS
    assert [b["$ref"] for b in DEFS["WallFeedFrame"]["oneOf"]] == [
        "#/$defs/WallFrame",
        "#/$defs/WallChangesFrame",
        "#/$defs/WallPageFrame",
        "#/$defs/WallMore",
    ]
    assert DEFS["WallFrame"]["properties"]["type"] == {"const": "wall"}
    assert DEFS["WallChangesFrame"]["properties"]["type"] == {"const": "wall_changes"}
    assert DEFS["WallPageFrame"]["properties"]["type"] == {"const": "wall_page"}
    assert DEFS["WallMore"]["properties"] == {"type": {"const": "wall_more"}}
    assert DEFS["WallMore"]["additionalProperties"] is False
    for sent in ("WallFrame", "WallChangesFrame", "WallPageFrame"):
        assert "total" in DEFS[sent]["required"], sent
    assert DEFS["WallChange"]["required"] == ["game_id"]
    for name, rule in DEFS["WallChange"]["properties"].items():
        # A seat still open is a null name inside `players`; the field itself is never null.
        field = {k: v for k, v in rule.items() if k != "items"} if name == "players" else rule
        assert "null" not in json.dumps(field), name
    assert DEFS["WallChange"]["properties"]["players"]["type"] == "array"
    assert DEFS["WallGame"]["properties"]["layout"] == {"$ref": "#/$defs/Layout"}
    assert set(DEFS["WallGame"]["required"]) == set(DEFS["WallGame"]["properties"])
