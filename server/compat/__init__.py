"""The only places that use private parts of a dependency, each tested: a module per dependency (uvicorn
has two: `uvicorn` for its websocket protocol, `uvicorn_gate` for the gate before its HTTP protocol).

Each module's `missing()` lists what it relies on and the installed version lacks (tests/compat fails
with that list and the version), so an upgrade that breaks one is caught before it runs.
"""

from __future__ import annotations

from importlib.metadata import version


def installed(distribution: str) -> str:
    """The installed version of `distribution`, for the messages of `missing()`."""
    return version(distribution)
