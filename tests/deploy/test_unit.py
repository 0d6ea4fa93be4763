"""deploy/orchestra.service: systemd accepts it; each unit it orders itself after exists or is only wanted.

`systemd-analyze verify` (Debian's systemd) reads the unit as systemd would; it warns about an unknown key
or value and still exits 0, so any line it prints about the unit is a failure too. It checks that ExecStart
is executable: the copy it reads runs this environment's `orchestra` instead of /opt/orchestra's.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.test_deploy import graceful_shutdown_seconds

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "orchestra.service"
INSTALLED_AT = "/opt/orchestra/bin/orchestra"
ORDERING = ("After", "Before")
PULLING = ("Wants", "Requires", "Requisite", "BindsTo", "PartOf", "Upholds")

needs_systemd = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="systemd-analyze is not installed (apt-get install systemd)",
)


def unit(text: str | None = None) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text() if text is None else text)
    return parser


def named(key: str, text: str | None = None) -> set[str]:
    """The units a [Unit] key names."""
    return set(unit(text)["Unit"].get(key, "").split())


def missing_units(text: str) -> set[str]:
    """The units the unit `text` orders itself against or pulls in that this machine's systemd lacks."""
    paths = unit_paths()
    every = set().union(*(named(key, text) for key in ORDERING + PULLING))
    return {name for name in every if not any((path / name).exists() for path in paths)}


def verify(text: str, folder: Path) -> list[str]:
    """What `systemd-analyze verify` says against a copy of the unit `text` (its exit status first, when not
    0), its ExecStart pointed at a real executable."""
    orchestra = shutil.which("orchestra", path=str(Path(sys.executable).parent))
    assert orchestra is not None
    copy = folder / "orchestra.service"
    copy.write_text(text.replace(INSTALLED_AT, orchestra))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    said = [line for line in (done.stdout + done.stderr).splitlines() if "orchestra.service" in line]
    return said if done.returncode == 0 else [f"exit {done.returncode}", *said]


def unit_paths() -> list[Path]:
    """Where this machine's systemd looks for units."""
    shown = subprocess.run(["systemd-analyze", "unit-paths"], capture_output=True, text=True, check=True)
    return [Path(line) for line in shown.stdout.split()]


def test_the_systemd_unit_runs_orchestra_serve_restarts_and_is_hardened() -> None:
    parsed = unit()
    assert set(parsed.sections()) == {"Unit", "Service", "Install"}
    service = parsed["Service"]
    program, command = service["ExecStart"].split()
    assert program == INSTALLED_AT and command == "serve"
    assert service["EnvironmentFile"].startswith("/etc/")
    assert service["Restart"] in ("on-failure", "always")
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= graceful_shutdown_seconds() + 5
    for key in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "RestrictNamespaces"):
        assert service[key] in ("yes", "strict"), key
    assert service["User"] != "root"
    assert parsed["Install"]["WantedBy"] == "multi-user.target"


@needs_systemd
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    assert verify(UNIT.read_text(), tmp_path) == []


@needs_systemd
@pytest.mark.parametrize(
    ("line", "broken", "said"),
    [
        ("Type=exec", "Type=bogus", "Failed to parse service type"),
        ("ProtectSystem=strict", "ProtectSystm=strict", "Unknown key"),
        (
            "ExecStart=/opt/orchestra/bin/orchestra serve",
            "ExecStart=/opt/none/orchestra serve",
            "not executable",
        ),
        (
            "Wants=network-online.target",
            "Requires=redis-server.engine.service\nWants=network-online.target",
            "not found",
        ),
    ],
    ids=["bad value", "unknown key", "missing program", "missing required unit"],
)
def test_verify_as_run_here_reports_what_systemd_would_ignore_or_refuse(
    tmp_path: Path, line: str, broken: str, said: str
) -> None:
    """The check above can fail: each of these breaks the unit, and verify (as the test reads it) says so."""
    text = UNIT.read_text()
    assert line in text
    complaints = verify(text.replace(line, broken), tmp_path)
    assert complaints and said in "\n".join(complaints)


@needs_systemd
def test_every_unit_it_names_exists_here_and_what_a_host_may_lack_is_only_wanted() -> None:
    """After= a unit that does not exist orders nothing, silently: so each one named must exist on this
    Debian machine (with systemd and the redis-server package), and be pulled in by Wants= alone, since
    a host with an external Redis has no redis-server.service and the node must start all the same."""
    missing = missing_units(UNIT.read_text())
    assert missing == set(), f"{sorted(missing)} named by {UNIT.name} but not a unit here"
    assert named("After") == {"network-online.target", "redis-server.service"}
    assert named("After") <= named("Wants")
    assert set().union(*(named(key) for key in PULLING if key != "Wants")) == set()


@needs_systemd
def test_a_misnamed_unit_to_order_after_passes_verify_but_not_the_name_check(tmp_path: Path) -> None:
    """The unit as it was: After= a Redis unit no package installs. systemd ignores it without a word."""
    line = "After=network-online.target redis-server.service"
    text = UNIT.read_text()
    assert line in text
    misnamed = text.replace(line, "After=network-online.target redis-server.engine.service")
    assert verify(misnamed, tmp_path) == []
    assert missing_units(misnamed) == {"redis-server.engine.service"}
