"""A lean websocket client for the load generator: RFC 6455 frames parsed straight off the socket.

The `websockets` client parses every frame through a chain of generators and copies its payload three
times; at some 9,000 frames a second (each command's frame to every client of its game) that cost the
generator two thirds of a core on the 2-core machine the servers share, and the meter's own queueing
showed up as their latency. This client does what the meter needs and no more: one handshake (it may
offer permessage-deflate, as browsers do, but refuses a server that accepts it, since it does not
decompress), masked text frames out, whole messages in (fragments joined), pings answered, and the
closing handshake. Tested against the `websockets` server, an independent implementation.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import struct
from collections import deque
from typing import cast
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK, InvalidHandshake

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CONTINUATION, CLOSE, PING, PONG = 1, 2, 0, 8, 9, 10


def client_frame(opcode: int, payload: bytes, mask: bytes | None = None) -> bytes:
    """A final client frame: masked, as RFC 6455 requires of clients (a random key unless given)."""
    key = os.urandom(4) if mask is None else mask
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    if not size:
        return header + key
    stream = (key * (size // 4 + 1))[:size]
    masked = (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(size, "little")
    return header + key + masked


class LightSocket(asyncio.Protocol):
    """One client connection; `send`, `recv` and `close` as the `websockets` client names them."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._head = bytearray()
        self._opened: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._buffer = bytearray()
        self._need = 0  # bytes the buffered frame needs in all, once its header is in
        self._fragments: list[bytes] | None = None
        self._messages: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed: Exception | None = None
        self._close_sent = False
        self._gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @classmethod
    async def connect(cls, url: str, offer_deflate: bool = False, timeout: float = 30.0) -> LightSocket:
        """Open a websocket to `url` (ws://host:port/path). Raises: OSError, InvalidHandshake."""
        parts = urlsplit(url)
        if parts.scheme != "ws" or parts.hostname is None:
            raise ValueError(f"a ws:// URL, not {url!r}")
        port = parts.port or 80
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        loop = asyncio.get_running_loop()
        transport, socket = await asyncio.wait_for(loop.create_connection(cls, parts.hostname, port), timeout)
        socket.transport = transport  # uvloop may call connection_made after create_connection returns
        key = base64.b64encode(os.urandom(16))
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {parts.hostname}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key.decode()}",
            "Sec-WebSocket-Version: 13",
        ]
        if offer_deflate:
            lines.append("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
        transport.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        try:
            head = await asyncio.wait_for(asyncio.shield(socket._opened), timeout)
            _check_handshake(head, key)
        except BaseException:
            transport.abort()
            raise
        return socket

    async def send(self, text: str) -> None:
        """Send one text message."""
        if self._closed is not None:
            raise self._closed
        assert self.transport is not None
        self.transport.write(client_frame(TEXT, text.encode()))

    async def recv(self, decode: bool = True) -> str | bytes:
        """The next message (text decoded unless `decode` is False). Raises: ConnectionClosed."""
        while not self._messages:
            if self._closed is not None:
                raise self._closed
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._messages.popleft()
        return data.decode() if decode else data

    async def close(self, code: int = 1000) -> None:
        """The closing handshake: send a close frame, wait for the server's, then drop the connection."""
        if self.transport is None or self._gone.done():
            return
        if not self._close_sent:
            self._close_sent = True
            self.transport.write(client_frame(CLOSE, struct.pack("!H", code)))
        try:
            await asyncio.wait_for(asyncio.shield(self._gone), 3)
        except TimeoutError:
            self.transport.abort()

    # asyncio.Protocol ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._opened.done():
            self._opened.set_exception(exc or ConnectionResetError("closed during the handshake"))
        self._fail(ConnectionClosedError(None, None))
        if not self._gone.done():
            self._gone.set_result(None)

    def data_received(self, data: bytes) -> None:
        if not self._opened.done():
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            self._opened.set_result(bytes(self._head[: end + 4]))
            data = bytes(self._head[end + 4 :])
            self._head.clear()
            if not data:
                return
        buffer = self._buffer
        if buffer:
            buffer += data
            if len(buffer) < self._need:  # a large frame still arriving: parse it once, when whole
                return
            view: bytes = bytes(buffer)
            buffer.clear()
        else:
            view = data
        self._need = 0
        pos, end = 0, len(view)
        while end - pos >= 2:
            first, second = view[pos], view[pos + 1]
            size, start = second & 0x7F, pos + 2
            if size == 126:
                if end - pos < 4:
                    break
                size, start = int.from_bytes(view[pos + 2 : pos + 4], "big"), pos + 4
            elif size == 127:
                if end - pos < 10:
                    break
                size, start = int.from_bytes(view[pos + 2 : pos + 10], "big"), pos + 10
            if second & 0x80:
                self._protocol_error("a server's frames are not masked")
                return
            if end - start < size:
                self._need = start - pos + size
                break
            self._frame(first, view[start : start + size])
            pos = start + size
        if pos < end:
            buffer += view[pos:]

    # frames --------------------------------------------------------------------------------------------

    def _frame(self, first: int, payload: bytes) -> None:
        opcode, final = first & 0x0F, first & 0x80
        if first & 0x70:
            self._protocol_error("reserved bits set: no extension was agreed")
        elif opcode in (TEXT, BINARY):
            if self._fragments is not None:
                self._protocol_error("a new message before the last one ended")
            elif final:
                self._deliver(payload)
            else:
                self._fragments = [payload]
        elif opcode == CONTINUATION:
            if self._fragments is None:
                self._protocol_error("a continuation without a message")
                return
            self._fragments.append(payload)
            if final:
                whole, self._fragments = b"".join(self._fragments), None
                self._deliver(whole)
        elif opcode == PING:
            if self.transport is not None and not self._close_sent:
                self.transport.write(client_frame(PONG, payload))
        elif opcode == CLOSE:
            self._closing(payload)
        elif opcode != PONG:
            self._protocol_error(f"unknown opcode {opcode}")

    def _deliver(self, message: bytes) -> None:
        self._messages.append(message)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _closing(self, payload: bytes) -> None:
        code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
        reason = payload[2:].decode("utf-8", "replace")
        if self.transport is not None and not self._close_sent:
            self._close_sent = True
            self.transport.write(client_frame(CLOSE, payload[:2]))
        closed = ConnectionClosedOK if code in (1000, 1001) else ConnectionClosedError
        self._fail(closed(None, None), f"{code} {reason}".strip())
        if self.transport is not None:
            self.transport.close()

    def _protocol_error(self, why: str) -> None:
        self._fail(ConnectionClosedError(None, None), why)
        if self.transport is not None:
            if not self._close_sent:
                self._close_sent = True
                self.transport.write(client_frame(CLOSE, struct.pack("!H", 1002)))
            self.transport.close()

    def _fail(self, exc: Exception, why: str = "") -> None:
        if self._closed is None:
            if why:
                exc.add_note(why)
            self._closed = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _check_handshake(head: bytes, key: bytes) -> None:
    status, *header_lines = head.decode("latin-1").split("\r\n")
    if not status.startswith("HTTP/1.1 101"):
        raise InvalidHandshake(f"the server answered {status!r}")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    expected = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
    if headers.get("sec-websocket-accept") != expected:
        raise InvalidHandshake("Sec-WebSocket-Accept does not match the key")
    if headers.get("sec-websocket-extensions"):
        raise InvalidHandshake("the server agreed to an extension; this client does not decompress")
