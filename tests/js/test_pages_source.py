"""The pages are built on the client library: no wire shape, delta application or socket of their own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "server" / "web" / "static"
# What only the library may know: the hello, the socket, the delta's fields, HTTP calls.
WIRE = ["WebSocket", '"hello"', "view_delta", "below_from", "chairs_from", "score_changes", "fetch("]
WIRE += ["wall_changes", "ended_kept", "wall_more", "wall_page"]  # the wall feed's frames: the library's


def test_each_page_loads_its_own_module() -> None:
    pages = sorted(path.stem for path in STATIC.glob("*.html"))
    assert pages == ["host", "index", "play", "player", "records", "replay", "wall", "watch"]
    for page in pages:
        html = (STATIC / f"{page}.html").read_text()
        scripts = re.findall(r'<script[^>]*src="([^"]+)"', html)
        assert scripts == [f"/static/{page}.js"], page
        assert (STATIC / f"{page}.js").is_file()


def test_the_page_modules_leave_the_wire_to_the_library() -> None:
    modules = sorted(STATIC.glob("*.js"))
    assert {path.name for path in modules} >= {
        "index.js",
        "play.js",
        "replay.js",
        "watch.js",
        "wall.js",
        "render.js",
        "live.js",
    }
    importers = set()
    for path in modules:
        source = path.read_text()
        for word in WIRE:
            assert word not in source, f"{path.name} holds {word!r}: that is the library's"
        if 'from "/client/orchestra.js"' in source:
            importers.add(path.name)
        # Token words come from the library's describeToken, written once.
        assert "performance`" not in source and "repair`" not in source, path.name
    assert importers >= {"render.js", "live.js", "index.js", "replay.js", "play.js", "wall.js"}
