"""The board layout as data: its spaces, parsed and validated once.

A layout names its spaces (id, instrument, family, eras, chair bonus, prestige per chair). The structure is
fixed by the rules (rules.md §1): three families by three eras, two Violin spaces in the strings row
straddling Baroque/Classical and Classical/Romantic, and one rare space (no era) per family. Only the
contents of the cells are data.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from domain import patterns
from domain.vocabulary import ERAS, FAMILIES, MATERIAL_CHOICE, RESOURCES, Era, Family

# parse_layout, the one way in for a layout, refuses the final line break the pattern lets through in
# Python (see domain.patterns).
SpaceId = Annotated[str, msgspec.Meta(pattern=patterns.SPACE_ID)]


class LayoutError(ValueError):
    """A layout file that does not describe a valid Orchestra board."""


class SpaceDef(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """One space of the board."""

    id: SpaceId
    instrument: SpaceId
    family: Family
    eras: tuple[Era, ...]
    bonus: dict[str, int]
    prestige: int = 3

    @property
    def rare(self) -> bool:
        """A rare space has no era and unlimited First Chairs."""
        return not self.eras


class Layout(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A whole board: its name, whether it was checked against the physical board, and its spaces."""

    name: str
    verified: bool
    spaces: tuple[SpaceDef, ...]

    def space(self, space_id: str) -> SpaceDef | None:
        """The space with this id, or None."""
        for space in self.spaces:
            if space.id == space_id:
                return space
        return None

    @property
    def space_ids(self) -> tuple[str, ...]:
        """Every space id, in layout order."""
        return tuple(space.id for space in self.spaces)

    @property
    def instruments(self) -> tuple[str, ...]:
        """Every instrument id, once each, in layout order."""
        return tuple(dict.fromkeys(space.instrument for space in self.spaces))


def parse_layout(data: bytes | str, source: str = "layout") -> Layout:
    """Parse and validate a layout from TOML text.

    Raises:
        LayoutError: naming the bad entry (its index and id) and what is wrong with it.
    """
    try:
        raw = msgspec.toml.decode(data)
    except msgspec.DecodeError as exc:
        raise LayoutError(f"{source}: not valid TOML: {exc}") from None
    try:
        layout = msgspec.convert(raw, Layout)
    except msgspec.ValidationError as exc:
        raise LayoutError(f"{source}: {_name_entry(raw, str(exc))}") from None
    problems = [f"{source}: {p}" for p in _structure_problems(layout)]
    if problems:
        raise LayoutError("; ".join(problems))
    return layout


def _name_entry(raw: Any, message: str) -> str:
    """Turn msgspec's `$.spaces[3].family` path into a name a person can find in the file."""
    marker = "$.spaces["
    if marker not in message:
        return message
    try:
        index = int(message.split(marker, 1)[1].split("]", 1)[0])
        space_id = raw["spaces"][index].get("id", "?")
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        return message
    return f"space {space_id!r} (entry {index + 1}): {message}"


def _structure_problems(layout: Layout) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for index, space in enumerate(layout.spaces):
        where = f"space {space.id!r} (entry {index + 1})"
        for field, value in (("id", space.id), ("instrument", space.instrument)):
            if value.endswith("\n"):
                problems.append(f"{where}: {field} must match {patterns.SPACE_ID!r}")
        if space.id in seen:
            problems.append(f"{where}: duplicate space id")
        seen.add(space.id)
        for key, amount in space.bonus.items():
            if key not in RESOURCES and key != MATERIAL_CHOICE:
                problems.append(f"{where}: unknown bonus {key!r}")
            elif type(amount) is not int or amount < 1:
                problems.append(f"{where}: bonus {key!r} must be a whole number >= 1")
        if not space.bonus:
            problems.append(f"{where}: has no bonus")
        if space.prestige < 0:
            problems.append(f"{where}: prestige must be >= 0")
        if len(space.eras) > 2 or len(set(space.eras)) != len(space.eras):
            problems.append(f"{where}: eras must be none (rare), one, or two different ones (Violin)")
        if len(space.eras) == 2 and tuple(ERAS.index(e) for e in space.eras) not in ((0, 1), (1, 2)):
            problems.append(f"{where}: a straddling space must span two adjacent eras, earlier first")
    if problems:
        return problems

    for family in FAMILIES:
        for era in ERAS:
            cell = [s.id for s in layout.spaces if s.family == family and s.eras == (era,)]
            if len(cell) != 1:
                problems.append(f"the {family} row needs exactly one {era} space, found {cell or 'none'}")
        rare = [s.id for s in layout.spaces if s.family == family and s.rare]
        if len(rare) != 1:
            problems.append(f"the {family} row needs exactly one rare space, found {rare or 'none'}")
    violins = [s for s in layout.spaces if len(s.eras) == 2]
    spans = sorted(s.eras for s in violins)
    if spans != [("baroque", "classical"), ("classical", "romantic")]:
        problems.append("there must be two Violin spaces, Baroque/Classical and Classical/Romantic")
    elif any(s.family != "strings" for s in violins) or violins[0].instrument != violins[1].instrument:
        problems.append("both Violin spaces must be strings spaces of one instrument")
    shared = {s.instrument for s in violins}
    counts: dict[str, int] = {}
    for space in layout.spaces:
        counts[space.instrument] = counts.get(space.instrument, 0) + 1
    for instrument, count in counts.items():
        if count > 1 and instrument not in shared:
            problems.append(f"instrument {instrument!r} is on {count} spaces; only the Violin may be")
    return problems
