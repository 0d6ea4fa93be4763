"""server.compat.uvicorn: the installed uvicorn has what the server runs on."""

from __future__ import annotations

from server.compat import installed
from server.compat.uvicorn import missing


def test_the_installed_uvicorn_has_what_the_server_relies_on() -> None:
    gaps = missing()
    assert not gaps, f"the server does not fit uvicorn {installed('uvicorn')}: " + "; ".join(gaps)
