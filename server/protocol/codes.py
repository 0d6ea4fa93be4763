"""Every code an answer can carry: a websocket `rejected` frame's, an HTTP error's, and a close's.

The one list: the published schema's enum for a rejection's `code` is made from it, and tests check that
every code the server writes (the rules' rejections, the session's, the HTTP routes') is in it and that
the tables of docs/protocol.md name each of them.
"""

from __future__ import annotations

# The codes of a websocket `rejected` frame (most of them are HTTP error codes as well).
CODES: tuple[str, ...] = (
    # The frame or request.
    "too_large",
    "rate_limited",
    "bad_request",
    # Access.
    "forbidden",
    # The game.
    "unknown_game",
    "game_over",
    "stale_version",
    "limit_reached",
    "table_not_full",
    "seat_taken",
    "seat_closed",
    "game_started",
    "game_not_over",
    "next_game_exists",
    # The rule, then the choices.
    "illegal_space",
    "cannot_take_back",
    "missing_choice",
    # The server and its store.
    "unavailable",
    "store_full",
    "damaged_game",
    "archiving",
    "history_lost",
)
# Codes only an HTTP error carries.
HTTP_ONLY: tuple[str, ...] = (
    "too_many_games",
    "no_open_seat",
    # The club records' routes (server.web.records).
    "unknown_parameter",
    "bad_date",
    "bad_limit",
    "bad_cursor",
    "bad_name",
    "unknown_player",
)

# The codes a websocket is closed with (besides 1000, 1001 and those the websocket layer sends itself).
POLICY = 1008
TOO_SLOW = 1013
# The game's stored history cannot be read: reconnecting cannot help until an operator restores it.
DAMAGED = 1011
# The stream no longer holds what this connection was sent (the store lost acknowledged writes and others
# were written at their versions): reconnect, and take the game as the new welcome and history give it.
HISTORY_CHANGED = 4001
# The host gave this connection's seat a new token: the token it came with plays no more (the page says so).
TOKEN_REISSUED = 4003
# The host closed this connection's seat: it takes no part in the game.
SEAT_CLOSED = 4004
