"""uvicorn: nothing private is used; what the server relies on is checked here.

The server runs uvicorn's sans-I/O websockets implementation by its public name (`ws="websockets-sansio"`).
"""

from __future__ import annotations

import uvicorn.config

from server.compat import installed

WS_IMPLEMENTATION = "websockets-sansio"


def missing() -> list[str]:
    """What the server relies on that the installed uvicorn lacks, each naming that version."""
    found = []
    if WS_IMPLEMENTATION not in uvicorn.config.WS_PROTOCOLS:
        found.append(
            f"uvicorn {installed('uvicorn')} has no ws={WS_IMPLEMENTATION!r} implementation "
            f"(it has {sorted(uvicorn.config.WS_PROTOCOLS)})"
        )
    return found
