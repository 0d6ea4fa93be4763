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
    "unicodedata",
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


# What the wheel runs ------------------------------------------------------------------------------------

# The server's packages ship without the benchmarks and the tests, and serve without the client: `orchestra
# demo` loads the client's demo by name when it runs (server/ops/cli.py), never by an import statement.
NOT_FOR_THE_SERVER = {"orchestra_client", "bench", "tests"}


def test_the_server_imports_neither_the_client_nor_the_benchmarks_nor_the_tests() -> None:
    offenders = {}
    for path in _modules("server"):
        found = _imports(ast.parse(path.read_text())) & NOT_FOR_THE_SERVER
        if found:
            offenders[str(path.relative_to(ROOT))] = sorted(found)
    assert not offenders, f"server modules importing what the wheel must run without: {offenders}"


def test_the_server_import_check_sees_imports_anywhere_in_a_module() -> None:
    source = (
        "import bench.common\n"
        "def demo():\n    from orchestra_client.demo import play_demo\n"
        "if True:\n    from tests.support import servers\n"
        "from server.ops import runner\n"
        "import importlib\nimportlib.import_module('orchestra_client.demo')\n"  # by name: allowed
    )
    assert _imports(ast.parse(source)) & NOT_FOR_THE_SERVER == NOT_FOR_THE_SERVER


def test_no_setting_reaches_a_failpoint() -> None:
    """Fault tests use real faults (kill, SIGSTOP) or a hook of their own in tests/support: no setting
    names one, and the old one is refused as unknown."""
    from server.config import Settings, from_env

    assert not [name for name in Settings.__struct_fields__ if "fail" in name]
    with pytest.raises(ValueError, match="failpoint"):
        from_env({"ORCHESTRA_FAILPOINT": "exit_after_append"})


# Import cycles ------------------------------------------------------------------------------------------

PROJECT_PACKAGES = ("domain", "projections", "server", "orchestra_client", "bench")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_sources() -> dict[str, tuple[Path, str]]:
    """Every module of the project's packages: its dotted name, its path and its source."""
    return {
        _module_name(path): (path, path.read_text())
        for package in PROJECT_PACKAGES
        for path in _modules(package)
    }


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module an ImportFrom names, relative imports resolved against `module`."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_graph(sources: dict[str, tuple[bool, str]]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, from every import statement anywhere in it (a function's,
    one under `if TYPE_CHECKING:` too). `import a.b.c` is an edge to a.b.c; `from a.b import c` is one to
    a.b.c when that is a module, else to a.b. The implicit import of parent packages is left out, and so
    are modules outside `sources`. `sources` maps a module's name to (is a package, source)."""
    graph: dict[str, set[str]] = {}
    for module, (is_package, source) in sources.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in sources)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node)
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in sources:
                        edges.add(target)
                    elif base in sources:
                        edges.add(base)
        edges.discard(module)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as [a, b, ..., a], or None when there is none."""
    on_path, done = 1, 2
    state: dict[str, int] = {}
    for start in sorted(graph):
        if start in state:
            continue
        path, state[start] = [start], on_path
        stack = [iter(sorted(graph.get(start, ())))]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                stack.pop()
                state[path.pop()] = done
                continue
            mark = state.get(target)
            if mark == on_path:
                return [*path[path.index(target) :], target]
            if mark is None:
                state[target] = on_path
                path.append(target)
                stack.append(iter(sorted(graph.get(target, ()))))
    return None


def test_no_import_cycle_among_the_projects_modules() -> None:
    sources = {
        name: (path.name == "__init__.py", source) for name, (path, source) in _project_sources().items()
    }
    cycle = find_cycle(import_graph(sources))
    assert cycle is None, "an import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_checker_finds_a_cycle_through_every_kind_of_import() -> None:
    sources = {
        "p": (True, "from p import a\n"),  # a package importing its module: no cycle by itself
        "p.a": (False, "def f():\n    from . import b\n"),  # function level, relative: a module
        "p.b": (False, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.c\n"),
        "p.c": (False, "from p.a import f\nimport os\n"),  # a name, not a module: an edge to p.a
        "q": (False, "from p import nothing_here\n"),  # a name of p: an edge to p
    }
    graph = import_graph(sources)
    assert graph == {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "q": {"p"}}
    assert find_cycle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    # Without p.c, no cycle: p imports p.a, and p.a's `from . import b` is no edge back to p.
    del sources["p.c"]
    assert find_cycle(import_graph(sources)) is None


# Ranks --------------------------------------------------------------------------------------------------

# The order a newcomer learns: a module imports only modules of its own rank or lower ones. The server's
# top-level modules are placed too: the clock and the credentials below the protocol (the session checks
# tokens); the settings, the connection limits and the metrics above the store and below the engine (the
# engine counts, the store needs none of them). `compat` ranks just below web, so only web and ops (the
# two above it) may use a dependency's private parts.
RANKS: tuple[tuple[str, ...], ...] = (
    ("domain",),
    ("projections",),
    ("server", "server.clock", "server.auth"),
    ("server.protocol",),
    ("server.store",),
    ("server.config", "server.connections", "server.metrics"),
    ("server.engine",),
    ("server.records",),
    ("server.compat",),
    ("server.web",),
    ("server.ops",),
)


def rank_of(module: str) -> int | None:
    """The rank of `module`: that of the longest entry naming it or a package holding it (so "server"
    covers only what no subpackage's entry does); None when unranked."""
    matches = [
        (len(name), rank)
        for rank, names in enumerate(RANKS)
        for name in names
        if module == name or module.startswith(f"{name}.")
    ]
    return max(matches)[1] if matches else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of `graph` from a ranked module of a lower rank than the module it names."""
    found = []
    for module, targets in sorted(graph.items()):
        low = rank_of(module)
        for target in sorted(targets):
            high = rank_of(target)
            if low is not None and high is not None and high > low:
                found.append(f"{module} -> {target}")
    return found


def test_every_top_level_module_of_the_server_is_placed_in_the_ranks() -> None:
    """A new module at server/'s top (or a new subpackage) must be given its rank in RANKS: else it would
    pass for the rank of "server" itself."""
    placed = {name for names in RANKS for name in names}
    tops = {".".join(name.split(".")[:2]) for name in _project_sources() if name.startswith("server.")}
    assert tops - placed == set()


def test_no_module_imports_a_higher_rank() -> None:
    sources = {
        name: (path.name == "__init__.py", source) for name, (path, source) in _project_sources().items()
    }
    upward = upward_imports(import_graph(sources))
    assert upward == [], "imports of a higher rank: " + "; ".join(upward)


def test_the_rank_checker_sees_an_upward_import_and_ranks_a_module_by_its_package() -> None:
    assert rank_of("server.store.redis.keys") == rank_of("server.store") == 4
    assert rank_of("server.auth") == 2 and rank_of("server") == 2 and rank_of("server.metrics") == 5
    assert rank_of("orchestra_client.session") is None
    sources = {
        "server.store.memory": (False, "from server.engine.owner import LiveGame\nimport server.clock\n"),
        "server.engine.owner": (False, "from server.store import EventStore\n"),
        "server.compat.uvicorn": (False, ""),
        "server.protocol.session": (False, "from server.compat import uvicorn\nfrom server import auth\n"),
        "server.clock": (False, ""),
        "server.auth": (False, ""),
    }
    assert upward_imports(import_graph(sources)) == [
        "server.protocol.session -> server.compat.uvicorn",
        "server.store.memory -> server.engine.owner",
    ]


# Dependencies' private parts ----------------------------------------------------------------------------

FENCED = ("uvicorn", "redis", "starlette", "websockets", "hiredis")
COMPAT = ROOT / "server" / "compat"


def private_uses(source: str) -> list[str]:
    """The imports in `source` of a private module or name (a part starting with `_`) of a fenced
    dependency, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in FENCED and any(part.startswith("_") for part in parts):
                    found.append(f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            parts = node.module.split(".")
            if parts[0] not in FENCED:
                continue
            private_module = any(part.startswith("_") for part in parts)
            for alias in node.names:
                if private_module or alias.name.startswith("_"):
                    found.append(f"from {node.module} import {alias.name}")
    return found


def test_only_server_compat_touches_the_private_parts_of_dependencies() -> None:
    offenders = {}
    for _, (path, source) in sorted(_project_sources().items()):
        if COMPAT in path.parents:
            continue
        uses = private_uses(source)
        if uses:
            offenders[str(path.relative_to(ROOT))] = uses
    assert not offenders, f"private parts of dependencies used outside server/compat: {offenders}"


def test_the_private_use_checker_sees_modules_and_names_and_nothing_public() -> None:
    source = (
        "import uvicorn._types\n"
        "import redis.asyncio\n"
        "from redis._parsers.base import BaseParser\n"
        "def f():\n    from websockets.protocol import _private\n"
        "from starlette.types import Scope as _Scope\n"  # a private alias of a public name: fine
        "from os import _exit\n"  # not a fenced dependency
        "from . import _line\n"  # the project's own
    )
    assert private_uses(source) == [
        "import uvicorn._types",
        "from redis._parsers.base import BaseParser",
        "from websockets.protocol import _private",
    ]


# The store's Redis adapter from outside ---------------------------------------------------------------


def private_store_imports(source: str) -> list[str]:
    """The modules of `source`'s imports that are private modules of the project's own packages (a part
    after the first starting with `_`, as server.store.redis._scripts)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            if parts[0] == "server" and any(
                part.startswith("_") and part != "__init__" for part in parts[1:]
            ):
                found.append(name)
                break
    return found


def test_tests_and_benchmarks_reach_redis_only_through_the_stores_public_modules() -> None:
    """Key names from server.store.redis.keys, the store from server.store.redis: never `_adapter`,
    `_scripts` or `_notify`."""
    offenders = {}
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]):
        found = [name for name in private_store_imports(path.read_text()) if name.startswith("server.store")]
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_the_private_module_check_sees_modules_and_names() -> None:
    source = (
        "from server.store.redis._scripts import events_key\n"
        "import server.store.redis._notify\n"
        "from server.store.redis import _adapter\n"
        "from server.store.redis.keys import events_key\n"
        "from server.store.redis import RedisEventStore\n"
    )
    assert private_store_imports(source) == [
        "server.store.redis._scripts",
        "server.store.redis._notify",
        "server.store.redis._adapter",
    ]
