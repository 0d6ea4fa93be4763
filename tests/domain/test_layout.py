"""The layout file: the standard one loads as rules.md §1 and §3 say; a malformed one is refused by name."""

from __future__ import annotations

from importlib.resources import files

import pytest

from domain import BUILTIN_LAYOUTS, STANDARD, LayoutError, parse_layout

TEXT = files("domain.layouts").joinpath("standard.toml").read_text()


def _edit(old: str, new: str, text: str = TEXT) -> str:
    assert text.count(old) >= 1, f"{old!r} is not in the layout text"
    return text.replace(old, new, 1)


def _without_space(space_id: str, text: str = TEXT) -> str:
    blocks = text.split("[[spaces]]")
    kept = [b for b in blocks if f'id = "{space_id}"\n' not in b]
    assert len(kept) == len(blocks) - 1
    return "[[spaces]]".join(kept)


def test_the_standard_layout_has_the_14_spaces_of_rules_md_in_order() -> None:
    assert STANDARD.space_ids == (
        "lute",
        "violin_bc",
        "viola",
        "violin_cr",
        "cello",
        "oboe",
        "clarinet",
        "flute",
        "harpsichord",
        "timpani",
        "piano",
        "rare_strings",
        "rare_winds",
        "rare_percussion_keyboards",
    )


def test_the_standard_layout_is_marked_unverified() -> None:
    assert STANDARD.name == "standard"
    assert STANDARD.verified is False
    assert BUILTIN_LAYOUTS["standard"] is STANDARD


def test_the_standard_layout_names_its_instruments_once_each() -> None:
    assert STANDARD.instruments == (
        "lute",
        "violin",
        "viola",
        "cello",
        "oboe",
        "clarinet",
        "flute",
        "harpsichord",
        "timpani",
        "piano",
        "rare_strings",
        "rare_winds",
        "rare_percussion_keyboards",
    )


@pytest.mark.parametrize(
    ("space_id", "family", "eras"),
    [
        pytest.param("lute", "strings", ("baroque",), id="lute"),
        pytest.param("violin_bc", "strings", ("baroque", "classical"), id="violin-bc"),
        pytest.param("viola", "strings", ("classical",), id="viola"),
        pytest.param("violin_cr", "strings", ("classical", "romantic"), id="violin-cr"),
        pytest.param("cello", "strings", ("romantic",), id="cello"),
        pytest.param("oboe", "winds", ("baroque",), id="oboe"),
        pytest.param("clarinet", "winds", ("classical",), id="clarinet"),
        pytest.param("flute", "winds", ("romantic",), id="flute"),
        pytest.param("harpsichord", "percussion_keyboards", ("baroque",), id="harpsichord"),
        pytest.param("timpani", "percussion_keyboards", ("classical",), id="timpani"),
        pytest.param("piano", "percussion_keyboards", ("romantic",), id="piano"),
        pytest.param("rare_strings", "strings", (), id="rare-strings"),
        pytest.param("rare_winds", "winds", (), id="rare-winds"),
        pytest.param("rare_percussion_keyboards", "percussion_keyboards", (), id="rare-percussion-keyboards"),
    ],
)
def test_each_space_sits_in_its_row_and_column(space_id: str, family: str, eras: tuple[str, ...]) -> None:
    space = STANDARD.space(space_id)
    assert space is not None
    assert (space.family, space.eras, space.rare) == (family, eras, not eras)


@pytest.mark.parametrize(
    ("space_id", "bonus"),
    [
        pytest.param("lute", {"animal": 1, "money": 2}, id="lute-card"),
        pytest.param("clarinet", {"wood": 1, "money": 2}, id="clarinet-card"),
        pytest.param("viola", {"money": 4}, id="viola-card"),
        pytest.param("violin_bc", {"inspiration": 1, "money": 2}, id="violin-bc"),
        pytest.param("violin_cr", {"wood": 1, "inspiration": 1, "money": 1}, id="violin-cr"),
        pytest.param("cello", {"wood": 1, "animal": 1, "money": 1}, id="cello"),
        pytest.param("oboe", {"wood": 1, "inspiration": 1}, id="oboe"),
        pytest.param("flute", {"metal": 1, "money": 2}, id="flute"),
        pytest.param("harpsichord", {"wood": 1, "metal": 1, "money": 1}, id="harpsichord"),
        pytest.param("timpani", {"animal": 1, "metal": 1, "money": 1}, id="timpani"),
        pytest.param("piano", {"metal": 1, "inspiration": 1, "money": 1}, id="piano"),
        pytest.param(
            "rare_strings", {"material_choice": 1, "inspiration": 1, "money": 1}, id="rare-strings-card"
        ),
        pytest.param("rare_winds", {"inspiration": 1, "apprentice": 1, "money": 1}, id="rare-winds-card"),
        pytest.param(
            "rare_percussion_keyboards",
            {"instrument_card": 1, "inspiration": 1, "money": 1},
            id="rare-percussion-keyboards-card",
        ),
    ],
)
def test_each_space_has_the_bonus_of_rules_section_3(space_id: str, bonus: dict[str, int]) -> None:
    space = STANDARD.space(space_id)
    assert space is not None
    assert space.bonus == bonus
    assert space.prestige == 3


def test_an_unknown_space_id_is_not_found() -> None:
    assert STANDARD.space("tuba") is None


def test_the_standard_text_parses_to_the_standard_layout() -> None:
    assert parse_layout(TEXT) == STANDARD
    assert parse_layout(TEXT.encode()) == STANDARD


def test_a_corrected_layout_with_other_values_loads() -> None:
    text = _edit("bonus = { money = 4 }\nprestige = 3", "bonus = { money = 5 }\nprestige = 4")
    text = _edit("verified = false", "verified = true", text)
    layout = parse_layout(text)
    viola = layout.space("viola")
    assert viola is not None
    assert (viola.bonus, viola.prestige, layout.verified) == ({"money": 5}, 4, True)


def test_a_layout_may_move_instruments_between_cells() -> None:
    text = _edit('id = "oboe"\ninstrument = "oboe"', 'id = "oboe"\ninstrument = "bassoon"')
    layout = parse_layout(text)
    assert "bassoon" in layout.instruments
    assert "oboe" not in layout.instruments


MALFORMED = [
    pytest.param("name = [", "not valid TOML", id="invalid-toml"),
    pytest.param(_edit('family = "winds"', 'family = "brass"'), "space 'oboe' (entry 6)", id="bad-family"),
    pytest.param(
        _edit('eras = ["romantic"]', 'eras = ["modern"]'), "space 'cello' (entry 5)", id="unknown-era"
    ),
    pytest.param(
        _edit("bonus = { money = 4 }", "bonus = { gold = 4 }"),
        "space 'viola' (entry 3): unknown bonus 'gold'",
        id="unknown-bonus-key",
    ),
    pytest.param(
        _edit("bonus = { money = 4 }", "bonus = { money = 0 }"),
        "space 'viola' (entry 3): bonus 'money' must be a whole number >= 1",
        id="zero-amount",
    ),
    pytest.param(
        _edit("bonus = { money = 4 }", "bonus = { money = -2 }"),
        "space 'viola' (entry 3): bonus 'money' must be a whole number >= 1",
        id="negative-amount",
    ),
    pytest.param(
        _edit("bonus = { money = 4 }", 'bonus = { money = "4" }'),
        "space 'viola' (entry 3)",
        id="amount-not-a-number",
    ),
    pytest.param(
        _edit("bonus = { money = 4 }", "bonus = {}"),
        "space 'viola' (entry 3): has no bonus",
        id="empty-bonus",
    ),
    pytest.param(
        _edit("bonus = { money = 4 }\nprestige = 3", "bonus = { money = 4 }\nprestige = -1"),
        "space 'viola' (entry 3): prestige must be >= 0",
        id="negative-prestige",
    ),
    pytest.param(
        _edit('id = "cello"', 'id = "viola"'),
        "space 'viola' (entry 5): duplicate space id",
        id="duplicate-id",
    ),
    pytest.param(
        _edit('id = "cello"', 'id = "Cello"'), "space 'Cello' (entry 5)", id="space-id-not-lowercase"
    ),
    pytest.param(
        _edit('id = "cello"', 'id = "cello\\n"'), "space 'cello\\n' (entry 5)", id="space-id-with-a-newline"
    ),
    pytest.param(
        _edit('eras = ["baroque", "classical"]', 'eras = ["baroque", "romantic"]'),
        "space 'violin_bc' (entry 2): a straddling space must span two adjacent eras, earlier first",
        id="violin-span-not-adjacent",
    ),
    pytest.param(
        _edit('eras = ["baroque", "classical"]', 'eras = ["classical", "baroque"]'),
        "space 'violin_bc' (entry 2): a straddling space must span two adjacent eras, earlier first",
        id="violin-span-backwards",
    ),
    pytest.param(
        _edit('eras = ["baroque", "classical"]', 'eras = ["baroque", "classical", "romantic"]'),
        "space 'violin_bc' (entry 2): eras must be none (rare), one, or two different ones (Violin)",
        id="three-eras",
    ),
    pytest.param(
        _edit('eras = ["baroque", "classical"]', 'eras = ["baroque", "baroque"]'),
        "space 'violin_bc' (entry 2): eras must be none (rare), one, or two different ones (Violin)",
        id="the-same-era-twice",
    ),
    pytest.param(
        _without_space("timpani"),
        "the percussion_keyboards row needs exactly one classical space, found none",
        id="missing-cell",
    ),
    pytest.param(
        _edit(
            'id = "flute"\ninstrument = "flute"\nfamily = "winds"\neras = ["romantic"]',
            'id = "flute"\ninstrument = "flute"\nfamily = "winds"\neras = ["classical"]',
        ),
        "the winds row needs exactly one classical space, found ['clarinet', 'flute']",
        id="two-spaces-in-one-cell",
    ),
    pytest.param(
        _without_space("rare_winds"),
        "the winds row needs exactly one rare space, found none",
        id="missing-rare-space",
    ),
    pytest.param(
        _without_space("violin_cr"),
        "there must be two Violin spaces, Baroque/Classical and Classical/Romantic",
        id="missing-violin-space",
    ),
    pytest.param(
        _edit('eras = ["classical", "romantic"]', 'eras = ["baroque", "classical"]'),
        "there must be two Violin spaces, Baroque/Classical and Classical/Romantic",
        id="both-violins-on-one-span",
    ),
    pytest.param(
        _edit('id = "violin_cr"\ninstrument = "violin"', 'id = "violin_cr"\ninstrument = "fiddle"'),
        "both Violin spaces must be strings spaces of one instrument",
        id="violin-spaces-of-two-instruments",
    ),
    pytest.param(
        _edit(
            'instrument = "violin"\nfamily = "strings"\neras = ["classical", "romantic"]',
            'instrument = "violin"\nfamily = "winds"\neras = ["classical", "romantic"]',
        ),
        "both Violin spaces must be strings spaces of one instrument",
        id="violin-space-outside-the-strings-row",
    ),
    pytest.param(
        _edit('id = "oboe"\ninstrument = "oboe"', 'id = "oboe"\ninstrument = "flute"'),
        "instrument 'flute' is on 2 spaces; only the Violin may be",
        id="instrument-on-two-spaces",
    ),
    pytest.param(
        _edit("verified = false", ""), "Object missing required field `verified`", id="missing-verified"
    ),
    pytest.param(
        _edit("verified = false", "verified = false\ncolour = 1"), "unknown field `colour`", id="unknown-key"
    ),
    pytest.param(
        _edit("prestige = 3\n", "prestige = 3\nshape = 1\n"), "space 'lute' (entry 1)", id="unknown-space-key"
    ),
    pytest.param('name = "x"\nverified = false\nspaces = [1]', "$.spaces[0]", id="space-not-a-table"),
]


@pytest.mark.parametrize(("text", "named"), MALFORMED)
def test_a_malformed_layout_is_refused_naming_the_bad_entry(text: str, named: str) -> None:
    with pytest.raises(LayoutError) as caught:
        parse_layout(text, source="mine.toml")
    message = str(caught.value)
    assert message.startswith("mine.toml: ")
    assert named in message


def test_every_structural_problem_of_a_layout_is_reported_at_once() -> None:
    text = _edit("bonus = { money = 4 }", "bonus = { gold = 4 }")
    text = _edit('id = "cello"', 'id = "viola"', text)
    with pytest.raises(LayoutError) as caught:
        parse_layout(text)
    message = str(caught.value)
    assert "unknown bonus 'gold'" in message
    assert "duplicate space id" in message
    assert message.count("layout: ") == 2


def test_a_layout_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_layout("")
