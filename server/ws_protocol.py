"""uvicorn's sans-I/O websocket protocol, with a direct write for frames that many clients share.

A game's every frame goes to each of its clients. Through ASGI, each send builds a message, passes two
coroutines, encodes the text to UTF-8 again and serializes the frame again, copying a view of some 30 KB
three times per client. Without compression, a server's text frame is the same bytes for every client
(no mask, no per-connection state), so it is framed once and written to each transport as it is: what
the websockets library's own `broadcast()` does.

The app finds the writer in its scope (`scope["extensions"][SHARED_TEXT]["write"]`). It writes only
while the connection is open, not paused by a full buffer and not compressing, and says whether it did;
otherwise the caller sends through ASGI as usual, which waits, refuses or compresses as it must.
"""

from __future__ import annotations

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State

SHARED_TEXT = "orchestra.shared_text"


class _LastFrame:
    """The last text framed, with its frame: a batch's frame is framed once for all its recipients."""

    __slots__ = ("pair",)

    def __init__(self) -> None:
        # Not ("", ...): the empty string is one object, and it too must be framed.
        self.pair: tuple[str | None, bytes] = (None, b"")

    def framed(self, text: str) -> bytes:
        pair = self.pair  # read once: one tuple, swapped whole
        if pair[0] is text:
            return pair[1]
        frame = Frame(Opcode.TEXT, text.encode()).serialize(mask=False)
        self.pair = (text, frame)
        return frame


_last = _LastFrame()


def framed(text: str) -> bytes:
    """`text` as a server's unmasked, uncompressed, final text frame (the same bytes for every client)."""
    return _last.framed(text)


class SharedFrameProtocol(WebSocketsSansIOProtocol):
    """The sans-I/O protocol, offering the app `write` for text frames (see the module's docstring)."""

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        if self.response.status_code == 101:  # refused handshakes never reach the app
            self.scope["extensions"][SHARED_TEXT] = {"write": self.write_text}

    def write_text(self, text: str) -> bool:
        """Write `text` as one frame now if the connection is plainly open; False if it is not."""
        conn = self.conn
        if (
            self.close_sent
            or self.disconnected
            or not self.writable.is_set()
            or conn.state is not State.OPEN
            or conn.extensions
            or conn.expect_continuation_frame
            or self.transport.is_closing()
        ):
            return False
        self.transport.write(_last.framed(text))
        return True
