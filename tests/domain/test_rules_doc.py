"""docs/rules.md says what the domain does: its tables and worked examples are replayed against the code.

Each check reads a table or block of the document and compares it with what `domain` (and, for era
counting, `projections.eras`) computes, so a change of rule or layout that the document does not follow
fails here, naming the row that differs.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path

import msgspec
import pytest

import domain
from domain import (
    STANDARD,
    ChairClaimed,
    ChairStolen,
    CreateGame,
    Event,
    Game,
    GameEnded,
    InstrumentToken,
    PerformanceToken,
    PlacedBelowLine,
    RepairToken,
    Token,
    decide,
    evolve,
    legal_spaces,
)
from domain.vocabulary import ERAS, FAMILIES, RESOURCES
from projections.eras import count_eras_covered, count_in_era

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rules.md"
TEXT = DOC.read_text()


def section(title: str) -> str:
    """The text of the section whose heading starts with `title` ('## 4.', '### 8.2'), up to the next."""
    level = title.split(" ", 1)[0]
    start = next(i for i, line in enumerate(LINES) if line.startswith(title))
    end = next(
        (
            i
            for i in range(start + 1, len(LINES))
            if LINES[i].startswith("#") and len(LINES[i].split(" ", 1)[0]) <= len(level)
        ),
        len(LINES),
    )
    return "\n".join(LINES[start:end])


LINES = TEXT.splitlines()


def tables(text: str) -> list[list[list[str]]]:
    """Every table of `text`: its rows (header and separator left out), each a list of cells."""
    found: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if current is None:
                current = []
                found.append(current)
                continue  # the header
            if not all(set(cell) <= {"-"} for cell in cells):
                current.append(cells)
        else:
            current = None
    return found


def flat(text: str) -> str:
    """`text` with its line breaks and runs of spaces as single spaces, to find a sentence in it."""
    return " ".join(text.split())


def ids(cell: str) -> list[str]:
    """The `ids` of a cell, in order."""
    return re.findall(r"`([^`]*)`", cell)


def amounts(gained: dict[str, int], sign: str = "") -> str:
    """A resource map as the document writes it: '+2 money, +1 inspiration'."""
    return ", ".join(f"{sign}{amount} {key}" for key, amount in gained.items()) or "none"


# Section 1 and 3: the layout ------------------------------------------------------------------------


def test_the_spaces_table_is_the_standard_layout_in_order() -> None:
    (_, rows) = tables(section("## 1."))[:2]
    assert [row[0] for row in rows] == [f"`{space.id}`" for space in STANDARD.spaces]
    for row, space in zip(rows, STANDARD.spaces, strict=True):
        assert ids(row[1]) == [space.instrument], space.id
        assert ids(row[2]) == [space.family], space.id
        assert (ids(row[3]) or []) == list(space.eras), space.id
        assert row[3] != "none" or space.rare
        # Only the Violin and rare spaces sit where the printed rules put them.
        assert row[4] == ("printed" if space.rare or len(space.eras) == 2 else "provisional"), space.id
    counted = f"So there are {len(STANDARD.spaces)} spaces and {len(STANDARD.instruments)} instruments"
    assert counted in flat(TEXT)
    assert STANDARD.verified is False and '"verified":false' in TEXT


def test_the_bonus_table_is_the_standard_layout() -> None:
    (rows,) = tables(section("## 3."))
    assert [ids(row[0]) for row in rows] == [[space.id] for space in STANDARD.spaces]
    for row, space in zip(rows, STANDARD.spaces, strict=True):
        assert row[1] == ", ".join(f"{n} `{key}`" for key, n in space.bonus.items()), space.id
    # Printed: the bonuses of the Lute, the Viola, the Clarinet and the rare row; the rest are ours.
    printed = {"lute", "viola", "clarinet"} | {space.id for space in STANDARD.spaces if space.rare}
    assert {ids(row[0])[0] for row in rows if row[2] == "printed"} == printed
    assert {row[2] for row in rows} == {"printed", "provisional"}


def test_the_resources_table_names_every_resource_in_their_order() -> None:
    (rows,) = tables(section("## 2."))
    assert [name for row in rows for name in ids(row[0])] == list(RESOURCES)


def test_the_layout_excerpt_is_the_game_created_form_of_those_spaces() -> None:
    excerpt = section("### Reading a game's layout").split("```json\n", 1)[1].split("```", 1)[0]
    encoded = {space.id: msgspec.json.encode(space).decode() for space in STANDARD.spaces}
    shown = [line.strip().rstrip(",") for line in excerpt.splitlines() if line.strip().startswith('{"id"')]
    assert shown and all(line == encoded[json.loads(line)["id"]] for line in shown)


def test_every_chair_is_worth_the_prestige_the_document_gives() -> None:
    assert {space.prestige for space in STANDARD.spaces} == {3}
    assert "the standard layout gives 3 prestige to every First Chair" in flat(section("## 7."))


# Section 4: where a token may go ---------------------------------------------------------------------


def every_token() -> list[Token]:
    tokens: list[Token] = [PerformanceToken(era=era) for era in ERAS]
    tokens += [RepairToken(family=family) for family in FAMILIES]
    tokens += [InstrumentToken(instrument=instrument) for instrument in STANDARD.instruments]
    return tokens


def read_token(cell: str) -> Token:
    kind, value = cell.split(" ", 1)
    (name,) = ids(value)
    field = {"performance": "era", "repair": "family", "instrument": "instrument"}[kind]
    token: Token = msgspec.convert({"kind": kind, field: name}, Token)
    return token


def test_the_table_of_legal_spaces_is_what_the_rules_decide_for_every_token() -> None:
    rows = tables(section("## 4."))[1]
    assert [read_token(row[0]) for row in rows] == every_token()
    for row in rows:
        assert tuple(ids(row[1])) == legal_spaces(STANDARD, read_token(row[0])), row[0]


# Section 6: era counting -----------------------------------------------------------------------------


def test_the_era_counting_example_counts_as_the_document_says() -> None:
    state = start(("Ada",))
    placements: list[tuple[str, Token]] = [
        ("lute", PerformanceToken(era="baroque")),
        ("violin_bc", RepairToken(family="strings")),
        ("violin_cr", RepairToken(family="strings")),
    ]
    for space, token in placements:
        (event,) = decide(state, domain.Place(seat=0, id=space, token=token, space=space))
        state = evolve(state, event)
    assert count_eras_covered(state, 0).value == 3
    assert count_in_era(state, 0, "classical").value == 2
    assert "covers all three eras" in flat(section("## 6.")) and "has 2 Classical tokens" in flat(
        section("## 6.")
    )


# Section 8: the worked examples ----------------------------------------------------------------------


def start(players: tuple[str, ...]) -> Game:
    events = decide(Game(), CreateGame(game_id="rules-doc", players=players))
    return functools.reduce(evolve, events, Game())


def replay(block: str) -> tuple[list[tuple[str, Event]], Game]:
    """Play a worked example's block; check each event line; return (player, event) pairs and the end."""
    lines = block.splitlines()
    players = tuple(json.loads(lines[0].removeprefix("POST /games "))["players"])
    state = start(players)
    played: list[tuple[str, Event]] = []
    for sent, answer in zip(lines[1::2], lines[2::2], strict=True):
        name, frame = sent.split(" ", 1)
        command = msgspec.convert({**json.loads(frame), "seat": players.index(name)}, domain.Command)
        (event,) = decide(state, command)
        assert answer == f" => {msgspec.json.encode(event).decode()}", f"{name}: {frame}"
        state = evolve(state, event)
        played.append((name, event))
    return played, state


EXAMPLES = ["### 8.1", "### 8.2"]


@pytest.mark.parametrize("title", EXAMPLES)
def test_a_worked_example_gives_the_events_and_gains_its_table_shows(title: str) -> None:
    text = section(title)
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    played, _ = replay(block)
    steps = tables(text)[0]
    assert [row[0] for row in steps] == [str(n) for n in range(1, len(played) + 1)]
    for row, (name, event) in zip(steps, played, strict=True):
        assert row[1] == name, row
        if isinstance(event, GameEnded):
            assert row[5] == ""
            continue
        assert isinstance(event, ChairClaimed | ChairStolen | PlacedBelowLine), row
        gained = event.consolation if isinstance(event, PlacedBelowLine) else event.bonus
        assert row[5] == amounts(gained, "+"), row


def test_the_final_scores_of_the_second_example_are_the_game_ended_ones() -> None:
    text = section("### 8.2")
    played, state = replay(text.split("```text\n", 1)[1].split("```", 1)[0])
    ended = played[-1][1]
    assert isinstance(ended, GameEnded) and state.ended
    rows = tables(text)[1]
    ranks = {rank.seat: rank.rank for rank in ended.ranking}
    for row, score in zip(rows, ended.scores, strict=True):
        assert row[0] == str(score.seat)
        assert row[1] == state.players[score.seat]
        assert (ids(row[2]) or []) == list(score.chairs), row
        assert row[3] == str(score.prestige)
        assert row[4] == amounts(score.resources), row
        assert row[5] == str(ranks[score.seat])
    order = ", ".join(str(state.players[rank.seat]) for rank in ended.ranking)
    assert f"`ranking` lists {order}." in flat(text)


# Every section the code and tests cite ("rules.md §5") exists ----------------------------------------


def test_every_section_cited_as_rules_md_exists() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.js", "*.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", TEXT, flags=re.MULTILINE))
    cited: set[str] = set()
    for name in tracked:
        path = ROOT / name
        if path.is_file():
            for refs in re.findall(r"rules\.md ((?:§\d+(?:\.\d+)?(?:,? (?:and )?)?)+)", path.read_text()):
                cited.update(re.findall(r"§(\d+(?:\.\d+)?)", refs))
    assert cited, "the code cites rules.md's sections"
    assert cited <= headings, f"sections cited but missing from docs/rules.md: {sorted(cited - headings)}"
