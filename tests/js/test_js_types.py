"""clients/js/orchestra.d.ts against the published schema: each shape of /schema.json's `$defs` is an
interface of the same name with the same fields, optional exactly where the schema does not require them;
each union names the same members; the codes are server/protocol/codes.py's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from server.protocol import codes, schema

TYPES = Path(__file__).resolve().parents[2] / "clients" / "js" / "orchestra.d.ts"
# The schema's name, where the declarations use another (`Event` would hide the DOM's in a user's file).
RENAMED = {"Event": "GameEvent"}


def _definitions() -> dict[str, Any]:
    document = schema.document()
    if isinstance(document, bytes | str):
        document = msgspec.json.decode(document)
    defs: dict[str, Any] = document["$defs"]
    return defs


def _interfaces(text: str) -> dict[str, dict[str, tuple[bool, str]]]:
    """Each `export interface`'s fields: whether each is optional, and its type."""
    found: dict[str, dict[str, tuple[bool, str]]] = {}
    for name, body in re.findall(r"^export interface (\w+) \{\n(.*?)^\}", text, re.MULTILINE | re.DOTALL):
        fields = re.findall(r"^  (?:readonly )?(\w+)(\??): (.*);$", body, re.MULTILINE)
        found[name] = {field: (bool(optional), kind) for field, optional, kind in fields}
    return found


def _unions(text: str) -> dict[str, set[str]]:
    """Each `export type X = A | B | ...;` (on one line or several): its members."""
    found: dict[str, set[str]] = {}
    for name, members in re.findall(r"^export type (\w+) =\s*([^;]*);", text, re.MULTILINE):
        found[name] = {member.strip() for member in members.split("|") if member.strip()}
    return found


def test_every_shape_of_the_schema_is_declared_with_its_fields() -> None:
    text = TYPES.read_text()
    interfaces = _interfaces(text)
    shapes = {name: body for name, body in _definitions().items() if "properties" in body}
    assert len(shapes) >= 30
    for name, body in shapes.items():
        assert name in interfaces, f"{name} is not declared in orchestra.d.ts"
        required = set(body.get("required", ()))
        declared = interfaces[name]
        assert set(declared) == set(body["properties"]), name
        for field, rule in body["properties"].items():
            optional, kind = declared[field]
            assert optional == (field not in required), f"{name}.{field}: optional iff not required"
            # A field the schema forbids (`false`) is declared `?: never`, so that a union narrows on it.
            assert (kind == "never") == (rule is False), f"{name}.{field}"


def test_every_union_of_the_schema_names_the_same_members() -> None:
    unions = _unions(TYPES.read_text())
    for name, body in _definitions().items():
        if "oneOf" not in body:
            continue
        members = {
            RENAMED.get(ref["$ref"].rsplit("/", 1)[1], ref["$ref"].rsplit("/", 1)[1]) for ref in body["oneOf"]
        }
        declared = RENAMED.get(name, name)
        assert unions.get(declared) == members, name


def test_the_codes_are_the_servers() -> None:
    unions = _unions(TYPES.read_text())
    quoted = {code.strip('"') for code in unions["RejectionCode"]}
    assert quoted == set(codes.CODES)
    assert unions["HttpErrorCode"] == {"RejectionCode", *(f'"{code}"' for code in codes.HTTP_ONLY)}
