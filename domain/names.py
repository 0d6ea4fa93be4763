"""Player names: what a game accepts as a name, and the form it keeps.

A name is trimmed and put in Unicode NFC, then must be 1 to 32 characters long, hold no invisible or
direction-changing character (control, format, separator, surrogate, private-use or unassigned code
points: bidi overrides, zero-width spaces and joiners among them), and differ from every other name of
the game ignoring case and width (Unicode NFKC casefold: "Ada", "ADA" and "Ａｄａ" are one name).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from domain.errors import BadName

MAX_NAME = 32
# Categories of code points a name may not hold: controls (Cc), format characters (Cf: bidi marks and
# overrides, zero-width space and joiners, the BOM), surrogates, private use, unassigned, and the line and
# paragraph separators.
_REFUSED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def player_names(names: Iterable[str | None]) -> tuple[str | None, ...]:
    """The names as a game keeps them (trimmed, NFC), in seat order; None (an open seat) stays None.

    Raises:
        BadName: a name empty or longer than 32 characters once trimmed, holding a refused character, or
            equal to another one ignoring case and width.
    """
    kept: list[str | None] = []
    seen: dict[str, int] = {}
    for seat, raw in enumerate(names):
        if raw is None:
            kept.append(None)
            continue
        name = _checked(seat, raw)
        key = _key(name)
        if key in seen:
            raise BadName(f"seat {seat}: the name is already seat {seen[key]}'s (names ignore case)")
        seen[key] = seat
        kept.append(name)
    return tuple(kept)


def seat_name(seat: int, raw: str, names: Iterable[str | None]) -> str:
    """The name a seat takes (trimmed, NFC), beside the game's `names` (None for an open seat).

    Raises:
        BadName: as `player_names`, the other names being the game's.
    """
    name = _checked(seat, raw)
    key = _key(name)
    for other, taken in enumerate(names):
        if taken is not None and _key(taken) == key:
            raise BadName(f"seat {seat}: the name is already seat {other}'s (names ignore case)")
    return name


def _checked(seat: int, raw: str) -> str:
    name = unicodedata.normalize("NFC", raw).strip()
    if not 1 <= len(name) <= MAX_NAME:
        raise BadName(f"seat {seat}: a player's name must be 1 to {MAX_NAME} characters once trimmed")
    for char in name:
        if unicodedata.category(char) in _REFUSED:
            raise BadName(
                f"seat {seat}: a player's name may not hold the invisible or control character "
                f"U+{ord(char):04X}"
            )
    return name


def _key(name: str) -> str:
    return unicodedata.normalize("NFKC", name.casefold())
