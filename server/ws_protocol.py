"""uvicorn's sans-I/O websocket protocol, with a direct write for frames that many clients share.

A game's every frame goes to each of its clients. Through ASGI, each send builds a message, passes two
coroutines, encodes the text to UTF-8 again and serializes the frame again, copying a view of some 30 KB
three times per client. Without compression, a server's text frame is the same bytes for every client
(no mask, no per-connection state), so it is framed once and written to each transport as it is: what
the websockets library's own `broadcast()` does. Frames come as the UTF-8 bytes msgspec encoded: the
text is never decoded to `str` and encoded again on this path.

The app finds the writer in its scope (`scope["extensions"][SHARED_TEXT]["write"]`), which takes the
frame's text as UTF-8 bytes (the caller vouches for the encoding). It writes only
while the connection is open, not paused by a full buffer and not compressing, and says whether it did;
otherwise the caller sends through ASGI as usual, which waits, refuses or compresses as it must.
"""

from __future__ import annotations

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request
from websockets.protocol import State

SHARED_TEXT = "orchestra.shared_text"
_FIN_TEXT = 0x81  # FIN set, no reserved bits (no extension), opcode 1 (text)


class _LastFrame:
    """The last text framed, with its frame: a batch's frame is framed once for all its recipients."""

    __slots__ = ("pair",)

    def __init__(self) -> None:
        # Not (b"", ...): the empty bytes is one object, and it too must be framed.
        self.pair: tuple[bytes | None, bytes] = (None, b"")

    def framed(self, data: bytes) -> bytes:
        pair = self.pair  # read once: one tuple, swapped whole
        if pair[0] is data:
            return pair[1]
        # RFC 6455 section 5.2, for a server (no mask): the length in 7 bits, or 126 and 16 bits, or 127
        # and 64 bits, big-endian.
        size = len(data)
        if size < 126:
            header = bytes((_FIN_TEXT, size))
        elif size < 1 << 16:
            header = bytes((_FIN_TEXT, 126)) + size.to_bytes(2, "big")
        else:
            header = bytes((_FIN_TEXT, 127)) + size.to_bytes(8, "big")
        frame = header + data
        self.pair = (data, frame)
        return frame


_last = _LastFrame()


def framed(data: bytes) -> bytes:
    """UTF-8 `data` as a server's unmasked, uncompressed, final text frame (the same for every client)."""
    return _last.framed(data)


class SharedFrameProtocol(WebSocketsSansIOProtocol):
    """The sans-I/O protocol, offering the app `write` for text frames (see the module's docstring)."""

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        if self.response.status_code == 101:  # refused handshakes never reach the app
            self.scope["extensions"][SHARED_TEXT] = {"write": self.write_text}

    def write_text(self, data: bytes) -> bool:
        """Write UTF-8 text `data` as one frame now if the connection is plainly open; False if not."""
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
        self.transport.write(_last.framed(data))
        return True
