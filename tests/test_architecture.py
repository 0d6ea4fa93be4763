"""The layers stay pure: domain/ imports only msgspec and pure stdlib; projections/ only domain too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PURE_STDLIB = {
    "__future__",
    "typing",
    "enum",
    "functools",
    "itertools",
    "collections",
    "dataclasses",
    "re",
    "math",
    "operator",
    "types",
    "abc",
}
ALLOWED = {
    "domain": PURE_STDLIB | {"msgspec", "domain"},
    "projections": PURE_STDLIB | {"msgspec", "domain", "projections"},
}
# The one exception: the shipped layout files are package data, read once at import like source code.
EXCEPTIONS = {Path("domain/layouts/__init__.py"): {"importlib"}}
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "__import__"}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", ["domain", "projections"])
def test_pure_packages_import_only_their_allow_list(package: str) -> None:
    for path in _modules(package):
        allowed = ALLOWED[package] | EXCEPTIONS.get(path.relative_to(ROOT), set())
        extra = _imports(ast.parse(path.read_text())) - allowed
        assert not extra, f"{path.relative_to(ROOT)} imports {sorted(extra)}"


@pytest.mark.parametrize("package", ["domain", "projections"])
def test_pure_packages_have_no_async_code_and_no_io_builtins(package: str) -> None:
    for path in _modules(package):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            assert not isinstance(node, ast.AsyncFunctionDef | ast.Await), f"async code in {path}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in FORBIDDEN_CALLS, f"{node.func.id}() in {path}:{node.lineno}"


def test_the_architecture_check_catches_a_forbidden_import() -> None:
    """The checker itself works: a module importing time or redis is reported."""
    tree = ast.parse("import time\nfrom redis import Redis\nimport msgspec\n")
    assert _imports(tree) - ALLOWED["domain"] == {"time", "redis"}


def test_projections_never_import_the_shell() -> None:
    for path in _modules("projections") + _modules("domain"):
        assert "server" not in _imports(ast.parse(path.read_text())), path
