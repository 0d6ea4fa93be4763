"""What `orchestra new-game` prints of a created game: its links (watch, replay, host, each seat's play
link, a token always in the fragment), and on a terminal a QR code of each link a phone can scan."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import segno

# Modules of quiet zone around a terminal QR code (the standard asks for 4; the terminal's own margin and
# the blocks drawn for light modules make 2 enough for a phone's camera).
QUIET = 2


def _fragment(token: str) -> str:
    return f"#token={quote(token, safe='')}"


def print_links(base: str, created: dict[str, Any], say: Callable[[str], None], qr: bool) -> None:
    """Print the game's links and each seat's token (shown this once); with `qr`, a QR code below each
    link a phone opens (the watch, host and play links)."""
    game = created["game_id"]
    path = f"{base}/games/{quote(game, safe='')}"

    def link(label: str, url: str) -> None:
        say(f"{label}{url}")
        if qr:
            say(terminal_qr(url).rstrip("\n"))

    say(f"game {game} created")
    watch_token = created.get("watch_token")
    link("  watch:  ", f"{path}/watch" + (_fragment(watch_token) if watch_token else ""))
    say(f"  replay: {path}/replay")
    if watch_token:
        say(f"  watch token (private game): {watch_token}")
    if created.get("host_token"):
        link("  host:   ", f"{path}/host{_fragment(created['host_token'])}")
    for seat in created["seats"]:
        say(f"  seat {seat['seat']} {seat.get('name') or '(open)'}: token {seat['token']}")
        link("      play: ", f"{path}/play{_fragment(seat['token'])}")
    say("The tokens are shown only this once; keep them.")


def terminal_qr(url: str) -> str:
    """`url` as a QR code in text, two modules a line (half blocks), for a terminal."""
    out = io.StringIO()
    segno.make(url, error="m").terminal(out=out, compact=True, border=QUIET)
    return out.getvalue()
