"""Why a command is rejected: one exception per stable code of protocol.md.

    Rejected                 every refusal; `code` is the wire code, the message is for the player
    ├── BadRequest           bad_request: a value the rules cannot read (unknown space, wrong materials)
    │   └── BadName          bad_request: a player's name breaks the name rules (domain.names)
    ├── Forbidden            forbidden: not this seat's to do
    ├── UnknownGame          unknown_game: no such game (yet)
    ├── GameOver             game_over: the game has ended
    ├── StaleVersion         stale_version: the game moved past the command's expected_version
    ├── LimitReached         limit_reached: the game holds its maximum number of placements
    ├── IllegalSpace         illegal_space: a real space where this token may not go
    ├── CannotTakeBack       cannot_take_back: the game's last event is not this seat's placement
    ├── MissingChoice        missing_choice: a choice the placement needs was not made
    ├── TableNotFull         table_not_full: a seat is still open (neither named nor closed)
    ├── SeatHasName          seat_taken: the seat has a name already
    ├── SeatIsClosed         seat_closed: the seat was closed by the host
    ├── GameStarted          game_started: a placement was made (a seat can no longer be closed)
    ├── GameNotOver          game_not_over: the game has not ended (no next game yet)
    └── NextGameExists       next_game_exists: the ended game has its next game already (which the
                             server answers with, never sending the code)

A rejected command changes nothing. When several reasons apply, the first in the order of protocol.md
answers: the frame, access, the game, the rule, the choices.
"""

from typing import ClassVar


class Rejected(Exception):
    """A command the rules refuse; nothing changes."""

    code: ClassVar[str] = "rejected"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(Rejected):
    """A value the rules cannot read."""

    code = "bad_request"


class BadName(BadRequest):
    """A player's name breaks the name rules (domain.names); `bad_request` on the wire."""


class Forbidden(Rejected):
    """The seat may not do this."""

    code = "forbidden"


class UnknownGame(Rejected):
    """The game does not exist."""

    code = "unknown_game"


class GameOver(Rejected):
    """The game has ended."""

    code = "game_over"


class StaleVersion(Rejected):
    """The game's version is not the command's expected_version."""

    code = "stale_version"


class LimitReached(Rejected):
    """The game holds its maximum number of placements."""

    code = "limit_reached"


class IllegalSpace(Rejected):
    """The token may not go to that space."""

    code = "illegal_space"


class CannotTakeBack(Rejected):
    """Only the seat's own placement may be taken back, and only while it is the game's last event."""

    code = "cannot_take_back"


class MissingChoice(Rejected):
    """The placement needs a choice the command did not make."""

    code = "missing_choice"


class TableNotFull(Rejected):
    """A seat is still open: no placement (nor end) until every seat has a name or is closed."""

    code = "table_not_full"


class SeatHasName(Rejected):
    """The seat has a name already."""

    code = "seat_taken"


class SeatIsClosed(Rejected):
    """The seat was closed: it takes no part in the game."""

    code = "seat_closed"


class GameStarted(Rejected):
    """A placement was made: the seats are as they are."""

    code = "game_started"


class GameNotOver(Rejected):
    """The game has not ended: it has no next game yet."""

    code = "game_not_over"


class NextGameExists(Rejected):
    """The ended game has its next game already (`game_id`): a later request answers that one."""

    code = "next_game_exists"

    def __init__(self, message: str, game_id: str) -> None:
        super().__init__(message)
        self.game_id = game_id
