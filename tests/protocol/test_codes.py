"""One list of codes (server.protocol.codes): every code the server writes is in it, and docs/protocol.md's
tables name exactly those codes."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import domain
from server.protocol.codes import CODES, HTTP_ONLY

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_MD = ROOT / "docs" / "protocol.md"
# The functions that write a code, and which of their positional arguments it is.
WRITERS = {"error": 1, "rejected": 1, "refuse": 0, "_refuse": 1, "SendFrame": 1}


def _written(tree: ast.AST) -> Iterator[str]:
    """The string constants the module passes as a code: to a writer, as `code=`, or under a "code" key."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            index = WRITERS.get(name)
            arguments = [node.args[index]] if index is not None and len(node.args) > index else []
            arguments += [k.value for k in node.keywords if k.arg == "code"]
            yield from (
                a.value for a in arguments if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "code" and isinstance(value, ast.Constant):
                    assert isinstance(value.value, str), ast.dump(value)
                    yield value.value


def test_codes_are_unique_snake_case_words() -> None:
    every = CODES + HTTP_ONLY
    assert len(set(every)) == len(every)
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in every)


def test_every_code_the_rules_raise_is_listed() -> None:
    def subclasses(cls: type[domain.Rejected]) -> Iterator[type[domain.Rejected]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    raised = {error.code for error in subclasses(domain.Rejected)}
    assert raised and sorted(raised - set(CODES)) == [], "list it in server/protocol/codes.py"


def test_every_code_the_server_writes_is_listed() -> None:
    written = {
        (path.relative_to(ROOT).as_posix(), code)
        for path in sorted((ROOT / "server").rglob("*.py"))
        for code in _written(ast.parse(path.read_text()))
    }
    assert {code for _, code in written} >= {"too_large", "rate_limited", "unavailable", "damaged_game"}
    unlisted = [(path, code) for path, code in sorted(written) if code not in CODES + HTTP_ONLY]
    assert unlisted == [], "list it in server/protocol/codes.py"
    # What the websocket side writes is a rejection's code.
    websocket = [(p, c) for p, c in written if p.startswith("server/protocol/") or p == "server/web/ws.py"]
    assert websocket and [(p, c) for p, c in websocket if c not in CODES] == []


def test_the_scan_finds_each_way_of_writing_a_code() -> None:
    source = (
        'error(400, "a_code", "m"); s.refuse("b_code", "m", 1); SendFrame(b"", "c_code"); '
        'x = {"code": "d_code"}'
    )
    assert set(_written(ast.parse(source))) == {"a_code", "b_code", "c_code", "d_code"}


def _table_codes(heading: str) -> list[str]:
    """The codes in the first table after a heading of protocol.md (a code is a `snake_case` cell)."""
    text = PROTOCOL_MD.read_text()
    after = text[text.index(heading) :]
    table = re.search(r"(?:^\|.*\|\n)+", after, re.MULTILINE)
    assert table is not None, heading
    cells = (cell.strip() for row in table.group(0).splitlines()[2:] for cell in row.strip("|").split("|"))
    return [c.strip("`") for c in cells if re.fullmatch(r"`[a-z]+(_[a-z]+)*`", c)]


def test_the_rejection_table_of_protocol_md_names_each_code_once() -> None:
    codes = _table_codes("## 8. Rejection codes")
    assert sorted(codes) == sorted(CODES)


def test_the_http_error_table_of_protocol_md_names_listed_codes_and_the_http_only_ones() -> None:
    codes = set(_table_codes("Errors are JSON"))
    assert set(HTTP_ONLY) <= codes <= set(CODES + HTTP_ONLY)
