"""clients/js as an npm package: `npm pack` ships the library alone, and programs that install the tarball
into a fresh folder and import it by name (a Node script, and a TypeScript file under `tsc --noEmit`)
play against a live server.

The install is offline, from tarballs only: the package's, and `ws` with its types packed from
clients/js/node_modules (CI's `npm ci` there), as a Node 20 user would `npm install orchestra-game-client ws`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.js.conftest import CLIENT, node_problem
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = CLIENT.parents[1]
MANIFEST: dict[str, Any] = json.loads((CLIENT / "package.json").read_text())
NAME: str = MANIFEST["name"]
USE = Path(__file__).resolve().parent / "package_use"
# What the tarball holds: the module, its declarations, the README and the manifest; no test, no config.
SHIPPED = {"package/orchestra.js", "package/orchestra.d.ts", "package/README.md", "package/package.json"}
# What a Node 20 TypeScript user installs beside the package, packed from clients/js's dev tools.
BESIDE = ["ws", "@types/ws", "@types/node", "undici-types"]
TSC = CLIENT / "node_modules" / ".bin" / "tsc"


class Installed:
    """The packed tarball, what npm said it holds, and a fresh project that installed it."""

    def __init__(self, tarball: Path, files: set[str], app: Path) -> None:
        self.tarball, self.files, self.app = tarball, files, app


def _npm(args: list[str], cwd: Path, cache: Path) -> str:
    """Run npm with its own empty cache and no registry: whatever it installs comes from the tarballs."""
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_cache": str(cache)}
    ran = subprocess.run(
        ["npm", *args, "--offline", "--no-audit", "--no-fund"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, f"npm {' '.join(args)}:\n{ran.stdout}{ran.stderr}"
    return ran.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    problem = node_problem()
    if problem is not None:
        pytest.skip(problem)
    work = tmp_path_factory.mktemp("package")
    cache, packed = work / "npm-cache", work / "packed"
    packed.mkdir()
    report = json.loads(_npm(["pack", "--json", "--pack-destination", str(packed)], CLIENT, cache))
    assert len(report) == 1
    tarball = packed / report[0]["filename"]
    tarballs = [tarball]
    for dependency in BESIDE:
        beside = json.loads(
            _npm(
                [
                    "pack",
                    "--json",
                    "--pack-destination",
                    str(packed),
                    str(CLIENT / "node_modules" / dependency),
                ],
                work,
                cache,
            )
        )
        tarballs.append(packed / beside[0]["filename"])
    app = work / "app"
    app.mkdir()
    (app / "package.json").write_text(
        json.dumps({"name": "plays-orchestra", "private": True, "type": "module"})
    )
    _npm(["install", *map(str, tarballs)], app, cache)
    for source in USE.iterdir():
        shutil.copy(source, app / source.name)
    return Installed(tarball, {f"package/{entry['path']}" for entry in report[0]["files"]}, app)


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def _tsc(app: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([str(TSC), *args], app)


def _stored(url: str, game_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/games/{game_id}/events", params={"after": "0"}, timeout=30)
    response.raise_for_status()
    return [json.loads(line) for line in response.text.splitlines() if line]


def _played(ran: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.strip().splitlines()
    assert lines, ran.stderr
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def test_the_manifest_names_the_package_and_its_entry_points() -> None:
    assert re.fullmatch(r"(@[a-z0-9-]+/)?[a-z0-9-]+", NAME)
    # The major version is the protocol version the client speaks (docs/protocol.md: v1).
    assert re.fullmatch(r"1\.\d+\.\d+", MANIFEST["version"]), MANIFEST["version"]
    assert "protocol v1" in MANIFEST["description"]
    assert MANIFEST["type"] == "module"
    assert "private" not in MANIFEST, "a private package cannot be published"
    # `types` must come before `default`: resolvers take the first condition that matches.
    assert list(MANIFEST["exports"]["."].items()) == [
        ("types", "./orchestra.d.ts"),
        ("default", "./orchestra.js"),
    ]
    assert MANIFEST["types"] == "./orchestra.d.ts" and MANIFEST["main"] == "./orchestra.js"
    assert MANIFEST["files"] == ["orchestra.js", "orchestra.d.ts", "README.md"]
    assert MANIFEST["engines"] == {"node": ">=20"}
    assert "dependencies" not in MANIFEST, "the library has no dependency"
    assert MANIFEST["peerDependenciesMeta"] == {"ws": {"optional": True}}
    # The repository's own tests run on exact versions, as package-lock.json holds them.
    lock = json.loads((CLIENT / "package-lock.json").read_text())
    assert lock["name"] == NAME and lock["version"] == MANIFEST["version"]
    for dependency, version in MANIFEST["devDependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{dependency} {version} is not pinned"
        assert lock["packages"][f"node_modules/{dependency}"]["version"] == version
    for guide in (CLIENT / "README.md", ROOT / "docs" / "clients.md"):
        assert f"npm install {NAME}" in guide.read_text(), guide


def test_the_tarball_ships_the_library_alone(installed: Installed) -> None:
    assert installed.files == SHIPPED
    with tarfile.open(installed.tarball) as tar:
        assert set(tar.getnames()) == SHIPPED
    package = installed.app / "node_modules" / NAME
    for name in ("orchestra.js", "orchestra.d.ts", "README.md"):
        assert (package / name).read_bytes() == (CLIENT / name).read_bytes(), name
    # The server serves the same files; its pages' links must still reach them.
    for name in ("orchestra.js", "orchestra.d.ts"):
        link = ROOT / "server" / "web" / "client" / name
        assert link.resolve() == (CLIENT / name).resolve(), link


def test_a_node_program_that_installed_it_plays_against_a_live_server(
    installed: Installed, server: ServerProcess
) -> None:
    node = shutil.which("node")
    assert node is not None
    played = _played(_run([node, "play.js", server.url], installed.app))
    accepted = played["accepted"]
    assert [accepted["type"], accepted["version"]] == ["accepted", 2]
    assert [envelope["event"]["type"] for envelope in accepted["events"]] == ["ChairClaimed"]
    assert [played["role"], played["seat"]] == ["player", 0]
    # The seat's listener and a spectator's got the envelope the answer carries, once each.
    assert played["ada_saw"] == accepted["events"] == played["watcher_saw"]
    assert played["viola"]["chair"]["seat"] == 0
    assert played["refused"] == "illegal_space"
    assert played["deep_import"] == "ERR_PACKAGE_PATH_NOT_EXPORTED"
    assert played["version"] == MANIFEST["version"]
    assert _stored(server.url, played["game_id"])[1:] == accepted["events"]


def test_a_typescript_program_that_installed_it_type_checks_and_plays(
    installed: Installed, server: ServerProcess
) -> None:
    for project in ("tsconfig.json", "tsconfig.bundler.json"):
        checked = _tsc(installed.app, "-p", project, "--noEmit")
        assert checked.returncode == 0, f"{project}:\n{checked.stdout}{checked.stderr}"
    built = _tsc(installed.app, "-p", "tsconfig.json")
    assert built.returncode == 0, built.stdout + built.stderr
    node = shutil.which("node")
    assert node is not None
    played = _played(_run([node, "build/play.js", server.url], installed.app))
    accepted = played["accepted"]
    assert [accepted["type"], accepted["version"], played["version"]] == ["accepted", 2, 2]
    assert played["saw"] == accepted["events"]
    assert played["refused"] == "illegal_space"
    assert _stored(server.url, played["game_id"])[1:] == accepted["events"]


def test_the_readme_example_runs_as_written_in_a_project_that_installed_it(
    installed: Installed, server: ServerProcess
) -> None:
    readme = (CLIENT / "README.md").read_text()
    found = re.search(r"^## Play\n.*?^```js\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert found is not None, "the README's Play section has no js example"
    example = found.group(1)
    assert f'from "{NAME}"' in example and '"http://127.0.0.1:8000"' in example
    script = installed.app / "readme_play.js"
    script.write_text(example.replace('"http://127.0.0.1:8000"', json.dumps(server.url)))
    node = shutil.which("node")
    assert node is not None
    ran = _run([node, script.name], installed.app)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.findall(r"^(\d+) (\w+)$", ran.stdout, re.MULTILINE) == [
        ("2", "ChairClaimed"),
        ("3", "GameEnded"),
    ]
    assert re.search(r"^placed at version 2 \{", ran.stdout, re.MULTILINE), ran.stdout


def test_tsc_checks_the_program_against_the_installed_declarations(installed: Installed) -> None:
    """Without the expected error's marker the same file fails: the package's types are in force."""
    program = (installed.app / "play.ts").read_text()
    marker = "// @ts-expect-error: an era the rules do not have (the declarations are in force, not `any`)\n"
    assert marker in program
    broken = installed.app / "broken.ts"
    broken.write_text(program.replace(marker, ""))
    try:
        for resolution in (
            ["--module", "nodenext", "--moduleResolution", "nodenext"],
            ["--module", "esnext", "--moduleResolution", "bundler"],
        ):
            checked = _tsc(
                installed.app,
                "--noEmit",
                "--strict",
                "--target",
                "es2022",
                "--types",
                "node",
                *resolution,
                "broken.ts",
            )
            assert checked.returncode != 0 and '"modern"' in checked.stdout, checked.stdout + checked.stderr
    finally:
        broken.unlink()
