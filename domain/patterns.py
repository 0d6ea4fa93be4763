"""The patterns string ids must match, written once for Python and for the published JSON Schema.

Each pattern keeps to the portable subset of regular expressions (character classes, counts, `^` and `$`),
so it means the same in Python's `re` and in ECMA-262, the dialect of JSON Schema validators; the schema
carries it as written. One difference remains: msgspec checks a pattern with `re.search`, where `$` also
matches before a final line break, while ECMA-262's `$` matches only at the very end. So what takes such an
id in refuses that final line break itself (the commands with `check_end`, parse_layout for a layout's ids),
and Python and a JSON Schema validator accept exactly the same strings.
"""

from __future__ import annotations

# A command id, chosen by the client: 1 to 64 ASCII letters, digits and `._:-`.
COMMAND_ID = r"^[A-Za-z0-9._:-]{1,64}$"
# A space or instrument id of a layout: lowercase, a letter first, at most 40 characters.
SPACE_ID = r"^[a-z][a-z0-9_]{0,39}$"


def check_end(value: str, pattern: str, path: str) -> None:
    """Refuse the final line break that Python's `$` lets through (ValueError, which msgspec reports as a
    ValidationError when decoding), worded as msgspec words a value outside its pattern."""
    if value.endswith("\n"):
        raise ValueError(f"Expected `str` matching regex {pattern!r} - at `{path}`")
