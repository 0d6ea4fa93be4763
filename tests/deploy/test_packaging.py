"""The wheel installs the project's own packages, under names that cannot collide with other projects'."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _packages() -> set[str]:
    """What setuptools' `packages.find` picks: every folder with an `__init__.py` matching an include."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    found = set()
    for init in ROOT.rglob("__init__.py"):
        name = ".".join(init.parent.relative_to(ROOT).parts)
        if any(fnmatch(name, pattern) for pattern in config["include"]):
            found.add(name)
    return found


def test_the_wheel_holds_the_server_the_rules_and_the_client_and_nothing_else() -> None:
    top_level = {name.split(".")[0] for name in _packages()}
    assert top_level == {"domain", "projections", "server", "orchestra_client"}


def test_every_server_subpackage_is_in_the_wheel_and_its_pages_ship_with_it() -> None:
    packages = _packages()
    for sub in ("protocol", "engine", "store", "store.redis", "web", "ops", "compat"):
        assert f"server.{sub}" in packages
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    # Every file a page loads (static/, its vendored libraries included) and the client's ship: each is
    # matched by a glob of package-data, as setuptools globs them from the package's folder.
    web = ROOT / "server" / "web"
    shipped = {path for pattern in data["server.web"] for path in web.glob(pattern) if path.is_file()}
    assets = {path for folder in ("static", "client") for path in (web / folder).rglob("*") if path.is_file()}
    assert {web / "static" / "index.html", web / "static" / "vendor" / "qrcode-generator.mjs"} <= assets
    assert not assets - shipped, sorted(str(path.relative_to(web)) for path in assets - shipped)


def test_the_wheel_ships_the_javascript_client_kept_in_clients_js() -> None:
    """server/web/client/ holds links to clients/js/'s files (the wheel copies what they point to)."""
    client = ROOT / "server" / "web" / "client"
    assert sorted(path.name for path in client.iterdir()) == ["orchestra.d.ts", "orchestra.js"]
    for path in client.iterdir():
        assert path.is_symlink() and path.resolve() == (ROOT / "clients" / "js" / path.name).resolve()
        assert path.read_bytes() == (ROOT / "clients" / "js" / path.name).read_bytes()
