"""uvicorn: the sans-I/O websocket protocol, with a direct write for frames that many clients share and
a direct close for clients too slow to read.

The private use of uvicorn's websocket protocol: `SharedFrameProtocol` subclasses its
`WebSocketsSansIOProtocol` and reads and sets its connection state. The direct write is kept because it
buys more than 10% (server CPU and the time until every spectator has a frame, `python -m bench fanout
--writer`; docs/performance.md); the direct close because no public way closes a connection whose client
does not read (see below). `missing()` lists what of that the installed uvicorn lacks (tests/compat fails
on it), and `ORCHESTRA_WS_SHARED_FRAMES=false` runs plain `ws="websockets-sansio"` instead (without
either).

A game's every frame goes to each of its clients. Through ASGI, each send builds a message, passes two
coroutines, encodes the text to UTF-8 again and serializes the frame again. Without compression, a
server's text frame is the same bytes for every client (no mask, no per-connection state), so it is
framed once and written to each transport as it is: what the websockets library's own `broadcast()`
does. Frames come as the UTF-8 bytes msgspec encoded: the text is never decoded to `str` and encoded
again on this path.

The app finds the writer in its scope (`shared_writer(scope)`), which takes the frame's text as UTF-8
bytes (the caller vouches for the encoding). It takes a frame only while the connection is open, not
paused by a full buffer and not compressing, and says whether it did; otherwise the caller sends
through ASGI as usual, which waits, refuses or compresses as it must. Frames taken in one turn of the
loop are written together when the turn ends (see `_Corks`), so a command's answer and its game's frame
reach its sender in one system call, before anything the connection sends through ASGI afterwards.

The scope also offers a direct close (`shared_closer(scope, grace)`), for a connection closed as too slow
to read. uvicorn's ASGI close first waits until the transport takes more data, which a peer that never
reads never allows: its close frame would never be written, and the session would last until uvicorn's
keepalive failed it (1011) tens of seconds later, or never with pings off. The direct close writes the
close frame behind what is already queued, hands the app its disconnect at once, and cuts the connection
should the peer not answer the close within `grace` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import uvicorn.config
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request
from websockets.protocol import State

from server.compat import installed

WS_IMPLEMENTATION = "websockets-sansio"
SHARED_TEXT = "orchestra.shared_text"
# What SharedFrameProtocol reads of uvicorn's protocol from its start (the handshake's `response` and
# `scope` are read as it completes: tests/compat's live connections cover them), and what it overrides.
_RELIED_ON = (
    "conn",
    "writable",
    "close_sent",
    "disconnected",
    "transport",
    "queue",
    "read_paused",
    "close_timer",
)
_OVERRIDDEN = ("handle_connect", "send")


def missing() -> list[str]:
    """What the server relies on that the installed uvicorn lacks, each naming that version."""
    found = []
    if WS_IMPLEMENTATION not in uvicorn.config.WS_PROTOCOLS:
        found.append(
            f"uvicorn {installed('uvicorn')} has no ws={WS_IMPLEMENTATION!r} implementation "
            f"(it has {sorted(uvicorn.config.WS_PROTOCOLS)})"
        )
    for name in _OVERRIDDEN:
        if not callable(getattr(WebSocketsSansIOProtocol, name, None)):
            found.append(f"uvicorn {installed('uvicorn')}: WebSocketsSansIOProtocol has no {name}()")
    return found


def missing_state(protocol: object) -> list[str]:
    """The attributes of a live protocol instance that SharedFrameProtocol reads and it lacks."""
    return [
        f"uvicorn {installed('uvicorn')}: WebSocketsSansIOProtocol has no attribute {name!r}"
        for name in _RELIED_ON
        if not hasattr(protocol, name)
    ]


def _offered(scope: Mapping[str, Any], name: str) -> Callable[..., bool] | None:
    offered = scope.get("extensions", {}).get(SHARED_TEXT)
    found = offered.get(name) if isinstance(offered, dict) else None
    return found if callable(found) else None


def shared_writer(scope: Mapping[str, Any]) -> Callable[[bytes], bool] | None:
    """The connection's direct writer of shared text frames, when the server offers one."""
    return _offered(scope, "write")


def shared_closer(scope: Mapping[str, Any], grace: float) -> Callable[[int, str], bool] | None:
    """The connection's direct close (`SharedFrameProtocol.close_now`, the peer given `grace` seconds to
    answer), when the server offers one: it takes a code and a reason (at most 123 UTF-8 bytes)."""
    close = _offered(scope, "close")
    if close is None:
        return None
    return lambda code, reason: close(code, reason, grace)


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


class _Corks:
    """The connections with frames written during this turn of the loop, sent together when it ends.

    A command's sender gets its `accepted` answer and then its game's `events` frame in the same turn:
    corked, the two go out in one system call instead of two, and so does whatever else a connection
    gets in one turn (a burst's frames). The flush is one callback per turn, for every connection.
    """

    __slots__ = ("waiting", "loop")

    def __init__(self) -> None:
        self.waiting: list[SharedFrameProtocol] = []
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop a flush is scheduled on, if any

    def add(self, protocol: SharedFrameProtocol) -> None:
        waiting = self.waiting
        waiting.append(protocol)
        # The turn's first: schedule the flush. (Only then: on Python 3.11 asking for the running loop
        # is a getpid() system call.) A flush left on a loop that has since closed (tests run many) is
        # scheduled again on this one.
        if len(waiting) == 1 or self.loop is None or self.loop.is_closed():
            self.loop = asyncio.get_running_loop()
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        waiting, self.waiting, self.loop = self.waiting, [], None
        for protocol in waiting:
            protocol.uncork()


_corks = _Corks()
# Past this many bytes corked for one connection, write now: memory stays bounded, and a full socket
# buffer is seen (the writer pauses) before more is taken.
CORK_BYTES = 64 * 1024


class SharedFrameProtocol(WebSocketsSansIOProtocol):
    """The sans-I/O protocol, offering the app `write` for text frames (see the module's docstring)."""

    _corked: list[bytes] | None = None
    _corked_bytes = 0

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        if self.response.status_code == 101:  # refused handshakes never reach the app
            self.scope["extensions"][SHARED_TEXT] = {"write": self.write_text, "close": self.close_now}

    def write_text(self, data: bytes) -> bool:
        """Write UTF-8 text `data` as one frame (at the end of this turn of the loop, with any other
        frames of the turn) if the connection is plainly open; False if it is not."""
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
            self.uncork()  # what was taken goes first: the caller sends this frame through ASGI next
            return False
        frame = _last.framed(data)
        corked = self._corked
        if corked is None:
            self._corked = [frame]
            self._corked_bytes = len(frame)
            _corks.add(self)
        else:
            corked.append(frame)
            self._corked_bytes += len(frame)
        if self._corked_bytes > CORK_BYTES:
            self.uncork()
        return True

    def uncork(self) -> None:
        """Write the frames corked so far, in one call."""
        frames, self._corked = self._corked, None
        if not frames or self.transport.is_closing():
            return
        if len(frames) == 1:
            self.transport.write(frames[0])
        else:
            self.transport.writelines(frames)

    def close_now(self, code: int, reason: str, grace: float) -> bool:
        """Close with `code` now, without waiting for the transport to take more: the close frame goes
        behind what is queued, the app gets its disconnect, and the connection is cut unless the peer
        answers the close within `grace` seconds. False (and nothing done) if it is not plainly open."""
        conn = self.conn
        closing = self.close_sent or self.disconnected or self.transport.is_closing()
        if closing or conn.state is not State.OPEN:
            return False
        self.uncork()
        conn.send_close(code, reason)
        self.transport.write(b"".join(conn.data_to_send()))
        # As uvicorn's own close does: from here on, its close handshake and connection_lost take over
        # (the peer's answer cancels the timer and closes the transport).
        self.close_sent = True
        self.queue.put_nowait({"type": "websocket.disconnect", "code": code, "reason": reason})
        if self.read_paused:  # the peer's answer to the close must be read
            self.read_paused = False
            self.transport.resume_reading()
        self.close_timer = asyncio.get_running_loop().call_later(grace, self.transport.abort)
        return True

    async def send(self, message: Any) -> None:
        # Through ASGI (a welcome, a refusal, a close): after what this connection has corked, in order.
        self.uncork()
        await super().send(message)
