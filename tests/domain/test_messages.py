"""The public API read from and written to wire JSON: commands decode, events encode as protocol.md says."""

from __future__ import annotations

import functools

import msgspec
import pytest

import domain
from domain import (
    STANDARD,
    ChairClaimed,
    ChairStolen,
    CreateGame,
    EndGame,
    GameCreated,
    GameEnded,
    InstrumentToken,
    PerformanceToken,
    Place,
    PlacedBelowLine,
    Rank,
    RepairToken,
    Score,
)

PLACE = (
    b'{"type":"place","seat":0,"id":"c-42","token":{"kind":"performance","era":"classical"},"space":"viola"'
)


def _decode(text: bytes) -> domain.Command:
    return msgspec.json.decode(text, type=domain.Command)


def test_a_place_frame_decodes_to_a_place_command_with_the_protocol_defaults() -> None:
    command = _decode(PLACE + b"}")
    assert command == Place(seat=0, id="c-42", token=PerformanceToken(era="classical"), space="viola")
    assert isinstance(command, Place)
    assert command.skill == 1
    assert command.consolation == "money"
    assert command.materials is None
    assert command.expected_version is None


def test_a_place_frame_with_every_field_decodes_them_all() -> None:
    text = (
        b'{"type":"place","seat":2,"id":"c-43","token":{"kind":"instrument","instrument":"rare_strings"},'
        b'"space":"rare_strings","skill":6,"consolation":"inspiration","materials":["wood","metal"],'
        b'"expected_version":7}'
    )
    assert _decode(text) == Place(
        seat=2,
        id="c-43",
        token=InstrumentToken(instrument="rare_strings"),
        space="rare_strings",
        skill=6,
        consolation="inspiration",
        materials=("wood", "metal"),
        expected_version=7,
    )


def test_a_repair_frame_decodes_its_family() -> None:
    text = b'{"type":"place","seat":1,"id":"c-44","token":{"kind":"repair","family":"winds"},"space":"oboe"}'
    command = _decode(text)
    assert isinstance(command, Place)
    assert command.token == RepairToken(family="winds")


def test_an_end_game_frame_decodes_to_end_game() -> None:
    assert _decode(b'{"type":"end_game","seat":0,"id":"c-45"}') == EndGame(seat=0, id="c-45")


def test_a_create_game_command_decodes_with_its_defaults() -> None:
    command = _decode(b'{"type":"create_game","game_id":"g1","players":["Ada","Ben"]}')
    assert command == CreateGame(game_id="g1", players=("Ada", "Ben"))
    assert isinstance(command, CreateGame)
    assert (command.layout, command.spectators, command.max_placements) == ("standard", "public", 1000)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(PLACE + b',"extra":1}', id="unknown-field-in-place"),
        pytest.param(
            b'{"type":"place","seat":0,"id":"c","token":{"kind":"repair","family":"winds","x":1},"space":"oboe"}',
            id="unknown-field-in-token",
        ),
        pytest.param(b'{"type":"end_game","seat":0,"id":"c","force":true}', id="unknown-field-in-end-game"),
        pytest.param(
            b'{"type":"create_game","game_id":"g","players":["Ada"],"seed":1}', id="unknown-field-in-create"
        ),
    ],
)
def test_an_unknown_field_is_a_validation_error(text: bytes) -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        _decode(text)


@pytest.mark.parametrize(
    "command_id",
    [
        pytest.param("", id="empty"),
        pytest.param("x" * 65, id="sixty-five-characters"),
        pytest.param("c 42", id="space"),
        pytest.param("c/42", id="slash"),
        pytest.param("c-é", id="non-ascii-letter"),
        pytest.param("c-42\n", id="trailing-newline"),
        pytest.param("\nc-42", id="leading-newline"),
    ],
)
def test_an_id_outside_the_pattern_is_a_validation_error(command_id: str) -> None:
    text = msgspec.json.encode({"type": "end_game", "seat": 0, "id": command_id})
    with pytest.raises(msgspec.ValidationError, match=r"\$\.id"):
        _decode(text)


@pytest.mark.parametrize(
    "command_id",
    [
        pytest.param("a", id="one-character"),
        pytest.param("x" * 64, id="sixty-four-characters"),
        pytest.param("Az09._:-", id="every-punctuation-allowed"),
    ],
)
def test_an_id_inside_the_pattern_decodes(command_id: str) -> None:
    text = msgspec.json.encode({"type": "end_game", "seat": 0, "id": command_id})
    assert _decode(text) == EndGame(seat=0, id=command_id)


def test_a_final_line_break_is_refused_in_every_command_with_an_id() -> None:
    """The id pattern ends with `$`, which in Python also matches before a final line break: refused."""
    place = {"type": "place", "seat": 0, "id": "c-1\n", "token": {"kind": "repair", "family": "winds"}}
    for command in (place | {"space": "oboe"}, {"type": "end_game", "seat": 0, "id": "c-1\n"}):
        with pytest.raises(msgspec.ValidationError, match=r"\$\.id"):
            _decode(msgspec.json.encode(command))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("skill", 0, id="skill-zero"),
        pytest.param("skill", 11, id="skill-eleven"),
        pytest.param("skill", 6.5, id="skill-not-an-integer"),
        pytest.param("seat", -1, id="negative-seat"),
        pytest.param("seat", 4, id="fifth-seat"),
        pytest.param("consolation", "gold", id="unknown-consolation"),
        pytest.param("materials", ["gold"], id="unknown-material"),
        pytest.param("space", "", id="empty-space"),
        pytest.param("expected_version", -1, id="negative-expected-version"),
        pytest.param("token", {"kind": "performance", "era": "modern"}, id="unknown-era"),
        pytest.param("token", {"kind": "repair", "family": "brass"}, id="unknown-family"),
        pytest.param("token", {"kind": "bid", "amount": 3}, id="unknown-token-kind"),
        pytest.param("token", {"kind": "instrument"}, id="instrument-without-its-id"),
    ],
)
def test_a_value_outside_its_type_is_a_validation_error(field: str, value: object) -> None:
    frame: dict[str, object] = {
        "type": "place",
        "seat": 0,
        "id": "c-1",
        "token": {"kind": "performance", "era": "classical"},
        "space": "viola",
    }
    frame[field] = value
    with pytest.raises(msgspec.ValidationError):
        _decode(msgspec.json.encode(frame))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(b'{"type":"place","seat":0,"id":"c","space":"viola"}', id="place-without-token"),
        pytest.param(b'{"type":"end_game","id":"c"}', id="end-game-without-seat"),
        pytest.param(b'{"type":"pass","seat":0,"id":"c"}', id="unknown-command-type"),
        pytest.param(b'{"seat":0,"id":"c"}', id="no-type"),
        pytest.param(b'{"type":"create_game","game_id":"g","players":[]}', id="no-players"),
        pytest.param(
            b'{"type":"create_game","game_id":"g","players":["a","b","c","d","e"]}', id="five-players"
        ),
        pytest.param(
            b'{"type":"create_game","game_id":"g","players":["%s"]}' % (b"x" * 129), id="oversized-name"
        ),
    ],
)
def test_a_missing_or_unknown_part_is_a_validation_error(text: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        _decode(text)


def _wire(event: domain.Event) -> dict[str, object]:
    decoded: dict[str, object] = msgspec.json.decode(msgspec.json.encode(event))
    return decoded


def test_chair_claimed_encodes_with_its_type_seat_space_token_and_bonus() -> None:
    event = ChairClaimed(seat=1, space="viola", token=PerformanceToken(era="classical"), bonus={"money": 4})
    wire = _wire(event)
    assert wire["type"] == "ChairClaimed"
    assert wire["seat"] == 1
    assert wire["space"] == "viola"
    assert wire["token"] == {"kind": "performance", "era": "classical"}
    assert wire["bonus"] == {"money": 4}


def test_chair_stolen_encodes_from_seat_and_reason() -> None:
    event = ChairStolen(
        seat=2,
        space="viola",
        token=InstrumentToken(instrument="viola"),
        bonus={"money": 8},
        from_seat=1,
        reason="instrument",
        doubled=True,
    )
    wire = _wire(event)
    assert wire["type"] == "ChairStolen"
    assert wire["from_seat"] == 1
    assert wire["reason"] == "instrument"
    assert wire["bonus"] == {"money": 8}
    assert wire["token"] == {"kind": "instrument", "instrument": "viola"}


def test_placed_below_line_encodes_consolation_and_reason() -> None:
    event = PlacedBelowLine(
        seat=0,
        space="oboe",
        token=RepairToken(family="winds"),
        consolation={"inspiration": 1},
        reason="no_majority",
    )
    wire = _wire(event)
    assert wire["type"] == "PlacedBelowLine"
    assert wire["consolation"] == {"inspiration": 1}
    assert wire["reason"] == "no_majority"
    assert "bonus" not in wire


def test_game_ended_encodes_scores_and_ranking() -> None:
    event = GameEnded(
        seat=0,
        scores=(Score(seat=0, chairs=("lute",), prestige=3, resources={"money": 2, "animal": 1}),),
        ranking=(Rank(seat=0, rank=1, prestige=3),),
    )
    wire = _wire(event)
    assert wire["type"] == "GameEnded"
    assert wire["scores"] == [
        {"seat": 0, "chairs": ["lute"], "prestige": 3, "resources": {"money": 2, "animal": 1}}
    ]
    assert wire["ranking"] == [{"seat": 0, "rank": 1, "prestige": 3}]


def test_game_created_encodes_its_whole_layout() -> None:
    event = GameCreated(game_id="g1", players=("Ada",), layout=STANDARD)
    wire = _wire(event)
    assert wire["type"] == "GameCreated"
    layout = wire["layout"]
    assert isinstance(layout, dict)
    assert len(layout["spaces"]) == 14
    assert msgspec.json.decode(msgspec.json.encode(event), type=domain.Event) == event


def test_decided_events_encode_resources_with_no_zero_amounts() -> None:
    state = functools.reduce(
        domain.evolve, domain.decide(domain.Game(), CreateGame(game_id="g", players=("Ada",))), domain.Game()
    )
    command = Place(seat=0, id="c", token=RepairToken(family="strings"), space="cello")
    (event,) = domain.decide(state, command)
    wire = _wire(event)
    bonus = wire["bonus"]
    assert bonus == {"money": 1, "wood": 1, "animal": 1}
    assert isinstance(bonus, dict)
    assert all(amount > 0 for amount in bonus.values())
