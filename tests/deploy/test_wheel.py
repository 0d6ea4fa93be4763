"""The sdist and the wheel as a release builds them (`python -m build`), and the wheel installed and run.

The build runs on a copy of the checkout's files (git's, without what .gitignore leaves out), so nothing is
written into the checkout. The wheel holds what the server runs and no scaffolding; installed alone into a
fresh venv, `orchestra serve` answers /readyz and a one-move `orchestra demo` plays its game to the end.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.venvs import Venv, get, make_venv
from tests.support.waiting import until_sync

ROOT = Path(__file__).resolve().parents[2]
# Helpers for tests and benchmarks, which live in tests/ and bench/ and never ship.
FORBIDDEN = ["bench/", "tests/", "server/ops/child.py", "server/compat/redis.py"]
DEMO_TIMEOUT = 120


@dataclass(frozen=True)
class Built:
    """The artefacts of one `python -m build`."""

    sdist: Path
    wheel: Path

    def wheel_names(self) -> list[str]:
        """The paths inside the wheel."""
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.namelist()


def source_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) copied to `target`, links kept."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        origin = ROOT / name
        if not origin.exists() and not origin.is_symlink():
            continue  # deleted in the working tree, not yet in git's index
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, destination, follow_symlinks=False)
    return target


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("build")
    source = source_copy(root / "source")
    command = [sys.executable, "-m", "build", "--outdir", str(root / "dist"), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = (root / "dist").glob("*.tar.gz")
    (wheel,) = (root / "dist").glob("*.whl")
    return Built(sdist, wheel)


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    venv = make_venv(tmp_path_factory.mktemp("wheel") / "venv")
    venv.pip_install(str(built.wheel))
    return venv


@pytest.mark.slow
def test_the_wheel_holds_no_test_or_benchmark_scaffolding(built: Built) -> None:
    shipped = [name for name in built.wheel_names() if any(name.startswith(bad) for bad in FORBIDDEN)]
    assert shipped == []


@pytest.mark.slow
def test_the_wheel_holds_the_packages_their_data_and_the_entry_point(built: Built) -> None:
    names = built.wheel_names()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"domain", "projections", "server", "orchestra_client"}
    assert "domain/layouts/standard.toml" in names and "server/web/static/index.html" in names
    with zipfile.ZipFile(built.wheel) as archive:
        # server/web/client/ holds links in the checkout: the wheel carries the files they point to.
        for name in ("orchestra.js", "orchestra.d.ts"):
            shipped = archive.read(f"server/web/client/{name}")
            assert shipped == (ROOT / "clients" / "js" / name).read_bytes(), name
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "orchestra = server.ops.cli:main" in archive.read(entry_points).decode()
    with tarfile.open(built.sdist) as sdist:
        members = sdist.getnames()
    assert any(m.endswith("/pyproject.toml") for m in members)
    assert not [m for m in members if "/.venv/" in m or "/var/" in m or "/node_modules/" in m]


@pytest.mark.slow
def test_orchestra_serve_from_the_installed_wheel_answers_readyz(installed: Venv, tmp_path: Path) -> None:
    settings = {"ORCHESTRA_DATA_DIR": str(tmp_path / "data")}
    server = installed.serve(
        ["orchestra", "serve", "--port", "0"], tmp_path, tmp_path / "serve.log", settings
    )
    try:
        try:
            until_sync(lambda: get(f"{server.url}/readyz")[0] == 200, 20, "/readyz answering 200")
        except AssertionError as exc:
            raise AssertionError(server.logs()[-2000:]) from exc
        status, page = get(f"{server.url}/")
        assert status == 200 and b"<html" in page.lower()
    finally:
        server.stop()
    assert (tmp_path / "data" / "signing.key").exists()
    assert not (tmp_path / "var").exists()


@pytest.mark.slow
def test_a_one_move_demo_from_the_installed_wheel_plays_its_game_to_the_end(
    installed: Venv, tmp_path: Path
) -> None:
    """One placement per bot, no pause: the demo prints its links, plays, says the game is over, exits."""
    command = [str(installed.bin / "orchestra"), "demo", "--port", "0", "--data-dir", str(tmp_path / "data")]
    command += ["--placements", "1", "--pace", "0", "0", "--seed", "7", "--exit-when-done"]
    done = subprocess.run(
        command, cwd=tmp_path, env=installed.environ(), capture_output=True, text=True, timeout=DEMO_TIMEOUT
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    watch = re.search(r"watch:\s+(http://127\.0\.0\.1:\d+)/games/([\w-]+)/watch", done.stdout)
    assert watch, done.stdout
    over = re.search(r"The game is over after (\d+) placements: (\S+)/replay", done.stdout)
    assert over, done.stdout
    assert int(over.group(1)) == 3  # one for each of the three bots
    assert over.group(2) == f"{watch.group(1)}/games/{watch.group(2)}"
