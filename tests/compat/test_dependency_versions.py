"""Every installed dependency is within the range pyproject.toml declares (the range compat relies on)."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
DECLARED = [
    Requirement(line)
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
]


@pytest.mark.parametrize("requirement", DECLARED, ids=[r.name for r in DECLARED])
def test_the_installed_version_is_in_the_declared_range(requirement: Requirement) -> None:
    try:
        found = version(requirement.name)
    except PackageNotFoundError:
        pytest.fail(f"{requirement.name} is not installed (pyproject.toml declares {requirement})")
    assert requirement.specifier.contains(found, prereleases=True), (
        f"{requirement.name} {found} is installed; pyproject.toml declares {requirement.specifier}"
    )


def test_every_declared_range_has_an_upper_bound() -> None:
    unbounded = [
        str(r) for r in DECLARED if not any(s.operator in ("<", "<=", "~=", "==") for s in r.specifier)
    ]
    assert not unbounded, f"no upper bound: {unbounded}"
