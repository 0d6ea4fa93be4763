"""One websocket client's side of the protocol, without I/O: messages in, actions out.

The session knows the protocol's order and rules: the first frame must be `hello`; a frame is checked for
size, then rate, then shape, then access, before it becomes a command; every command gets exactly one
answer; a refusal carries the frame's readable id. It never touches a socket, a store or a clock of its
own: the shell (server.web.ws) feeds it what arrived and what the game said, and carries out what it
returns (send a frame, close, join the game, submit a command). So it is tested with plain calls.

    session = Session(limits)
    session.receive(text)          -> [Join(hello)]            the shell looks the game up, then
    session.admit(...)             -> [SendFrame(welcome), ...]  or a refusal and CloseConnection
    session.receive(text)          -> [Submit(command)] | [SendFrame(rejected)]
    session.accepted(...) / .refused(...) -> SendFrame(accepted | rejected)
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from domain import Rejected
from domain.messages import EndGame, Place, PlayAgain, TakeBack, TakeSeat
from server import auth
from server.protocol.codes import POLICY, TOO_SLOW
from server.protocol.frames import (
    LIVE_VIEWS,
    Accepted,
    Hello,
    HistoryFrame,
    LiveView,
    Welcome,
    decode_frame,
    encode,
    readable_id,
    rejected,
    says_hello,
)
from server.protocol.limits import TokenBucket

HISTORY_CHUNK = 200
# RFC 6455: a close frame's payload is at most 125 bytes, two of them the code.
MAX_CLOSE_REASON_BYTES = 123
NOT_HELLO = "the first frame must be hello"


@dataclass(frozen=True, slots=True)
class SendFrame:
    """Send this frame (encoded JSON text); `code` names the rejection it is, if one (for metrics)."""

    data: bytes
    code: str | None = None


@dataclass(frozen=True, slots=True)
class CloseConnection:
    """Close the connection."""

    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Join:
    """Look the game up for this hello, then call `Session.admit`."""

    hello: Hello


@dataclass(frozen=True, slots=True)
class Submit:
    """Hand the command to its game; its outcome comes back through `Session.answer`."""

    command: Place | EndGame | TakeBack | TakeSeat | PlayAgain


@dataclass(frozen=True, slots=True)
class ReadHistory:
    """Read the stored envelopes after+1..until and pass them to `Session.history`."""

    after: int
    until: int


Action = SendFrame | CloseConnection | Join | Submit | ReadHistory


@dataclass(frozen=True, slots=True)
class Limits:
    """The per-connection limits of protocol.md."""

    max_frame_bytes: int = 16 * 1024
    rate_per_second: float = 50.0
    rate_burst: int = 100


class State(enum.Enum):
    """Where a session is: waiting for hello, joining its game, open for commands, or closed."""

    HELLO = "hello"
    JOINING = "joining"
    OPEN = "open"
    CLOSED = "closed"


class Session:
    """The protocol state of one connection."""

    def __init__(self, limits: Limits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or Limits()
        self._bucket = TokenBucket(self.limits.rate_per_second, self.limits.rate_burst, clock)
        self.state = State.HELLO
        self.hello: Hello | None = None
        self.role = "spectator"
        self.seat: int | None = None
        self.version = 0  # the game's version as last known: rejections carry it

    @property
    def view(self) -> LiveView:
        """What this client's live frames carry of the view: "delta", "full" or "none"."""
        return LIVE_VIEWS[self.hello.view] if self.hello is not None else "delta"

    def receive(self, text: str | None, version: int | None = None) -> list[Action]:
        """A message arrived: its text, or None for a binary frame; `version`, once admitted, the game's
        version now (every live frame up to it is already queued for this connection)."""
        if self.state is State.HELLO:
            return self._receive_hello(text)
        if self.state is not State.OPEN:
            return []
        if version is not None and version > self.version:
            # A refusal of this connection's own says the game's version now, never an older one than
            # the live frames the client was already sent.
            self.version = version
        if text is None:
            return self._refuse(None, "bad_request", "frames are JSON text, not binary")
        limit = self.limits.max_frame_bytes
        if _size(text) > limit:
            return self._refuse(None, "too_large", f"a frame may hold {limit} bytes")
        if not self._bucket.take():
            return self._refuse(readable_id(text), "rate_limited", "too many commands; slow down")
        try:
            frame = decode_frame(text)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            # A RecursionError (a frame nested deeper than the decoder reads) is not a DecodeError.
            return self._refuse(readable_id(text), "bad_request", str(exc))
        if isinstance(frame, Hello):
            return self._refuse(None, "bad_request", "hello was already said")
        if self.seat is None:
            return self._refuse(frame.id, "forbidden", "spectators cannot send commands")
        return [Submit(frame.command(self.seat))]

    def hello_timed_out(self) -> list[Action]:
        """No hello came in time."""
        if self.state is not State.HELLO:
            return []
        self.state = State.CLOSED
        return [CloseConnection(POLICY, "no hello in time")]

    def _receive_hello(self, text: str | None) -> list[Action]:
        """A hello joins; a frame that says it is a hello but is not a valid one (a value outside its type,
        an unknown field) is refused as `bad_request` naming what is wrong; anything else only closes."""
        frame: object = None
        if text is not None and _size(text) <= self.limits.max_frame_bytes:
            try:
                frame = decode_frame(text)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                if says_hello(text):
                    return self.refuse("bad_request", str(exc), POLICY)
        if not isinstance(frame, Hello):
            self.state = State.CLOSED
            return [CloseConnection(POLICY, NOT_HELLO)]
        self.hello = frame
        self.state = State.JOINING
        return [Join(frame)]

    def admit(
        self,
        *,
        found: bool,
        public: bool = False,
        credentials: Mapping[str, str] | None = None,
        full: bool = False,
        version: int = 0,
        view: Callable[[], bytes] = lambda: b"null",
    ) -> list[Action]:
        """What the game said of this hello: whether it exists, whether spectators need a token, its
        credential hashes, whether it is full of connections, its version, and how to encode its view.

        Admitted, the session sends the welcome (the view is encoded then, never for a refused hello),
        then asks for the history a `since` wants.
        """
        if self.state is not State.JOINING or self.hello is None:
            return []
        if not found:
            return self.refuse("unknown_game", "no such game", POLICY)
        seat = _seat_of(self.hello.token, public, credentials or {})
        if seat is None:
            return self.refuse("forbidden", "that token is not a seat or watch token of this game", POLICY)
        if full:
            return self.refuse("unavailable", "this game has its maximum of connections", TOO_SLOW)
        self.state = State.OPEN
        self.seat = seat if seat >= 0 else None
        self.role = "player" if seat >= 0 else "spectator"
        self.version = version
        welcome = Welcome(
            role="player" if seat >= 0 else "spectator",
            seat=self.seat,
            version=version,
            view=msgspec.Raw(view()),
        )
        actions: list[Action] = [SendFrame(encode(welcome))]
        since = self.hello.since
        if since is None:
            return actions
        if since > version:
            message = f"since {since} is past the game's version {version}; resuming from {version}"
            actions.append(SendFrame(rejected(None, "bad_request", message, version), "bad_request"))
        elif since < version:
            actions.append(ReadHistory(since, version))
        return actions

    def refuse(self, code: str, message: str, close_code: int) -> list[Action]:
        """Refuse the connection: a rejection, then the close."""
        self.state = State.CLOSED
        return [
            SendFrame(rejected(None, code, message, 0), code),
            CloseConnection(close_code, close_reason(message)),
        ]

    def history(self, data: Sequence[bytes]) -> list[SendFrame]:
        """The frames carrying stored envelopes (history after the welcome), in chunks."""
        return [
            SendFrame(encode(HistoryFrame([msgspec.Raw(d) for d in data[start : start + HISTORY_CHUNK]])))
            for start in range(0, len(data), HISTORY_CHUNK)
        ]

    def accepted(self, command_id: str, version: int, envelopes: Sequence[bytes]) -> SendFrame:
        """The answer to a command that was written: its last version and its envelopes as stored."""
        # A repeated id's first answer may be long past: it never takes the known version back.
        self.version = max(self.version, version)
        events = [msgspec.Raw(d) for d in envelopes]
        return SendFrame(encode(Accepted(id=command_id, version=version, events=events)))

    def refused(self, command_id: str, error: Rejected, version: int) -> SendFrame:
        """The answer to a command that was not written: the rule's rejection, or the shell's for a store
        that refused it (server.web.refusals)."""
        self.version = max(self.version, version)
        return SendFrame(rejected(command_id, error.code, error.message, version), error.code)

    def _refuse(self, id: str | None, code: str, message: str) -> list[Action]:
        return [SendFrame(rejected(id, code, message, self.version), code)]


def _seat_of(token: str | None, public: bool, credentials: Mapping[str, str]) -> int | None:
    """The seat of a token (>= 0), -1 for a spectator, None when refused."""
    if token is None:
        return -1 if public else None
    field = auth.identify(token, dict(credentials))
    if field is None:
        return None
    seat = auth.seat_of_key(field)
    return -1 if seat is None else seat  # the watch and the host tokens watch


def close_reason(text: str) -> str:
    """`text` cut to at most 123 UTF-8 bytes (a close frame's limit) at a character boundary; a character
    UTF-8 cannot encode (a lone surrogate) becomes "?"."""
    data = text.encode("utf-8", "replace")[:MAX_CLOSE_REASON_BYTES]
    # "ignore" drops the bytes of a character the cut split in two: only whole characters remain.
    return data.decode("utf-8", "ignore")


def _size(text: str) -> int:
    """The frame's size in bytes as it came off the wire (after any decompression)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
