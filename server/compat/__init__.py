"""The only places that use private parts of a dependency, one module per dependency, each tested.

Each module's `missing()` lists what it relies on and the installed version lacks (tests/compat fails
with that list and the version), so an upgrade that breaks one is caught before it runs.
"""

from __future__ import annotations

from importlib.metadata import version


def installed(distribution: str) -> str:
    """The installed version of `distribution`, for the messages of `missing()`."""
    return version(distribution)
