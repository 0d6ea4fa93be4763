"""The load generator's lean websocket client, against the `websockets` server (an independent
implementation that refuses unmasked or malformed client frames) and against byte-at-a-time input."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import (
    ConnectionClosed,
    ConnectionClosedError,
    ConnectionClosedOK,
    InvalidHandshake,
)

from bench.light_client import LightSocket, client_frame

Handler = Callable[[ServerConnection], Awaitable[None]]
SIZES = [0, 1, 125, 126, 127, 65535, 65536, 200_000]


@asynccontextmanager
async def server(handler: Handler, **options: Any) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0, max_size=None, **options) as running:
        port = next(iter(running.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/path?q=1"


async def echo(ws: ServerConnection) -> None:
    async for message in ws:
        await ws.send(message)


def unmask_plainly(frame: bytes) -> tuple[int, bytes]:
    """Opcode and payload of a masked frame, byte by byte (the oracle)."""
    size = frame[1] & 0x7F
    at = 2
    if size == 126:
        size, at = struct.unpack("!H", frame[2:4])[0], 4
    elif size == 127:
        size, at = struct.unpack("!Q", frame[2:10])[0], 10
    key, body = frame[at : at + 4], frame[at + 4 :]
    assert frame[1] & 0x80 and len(body) == size
    return frame[0] & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(body))


PAYLOADS = st.binary(max_size=300) | st.sampled_from([b"x" * n for n in (125, 126, 65535, 65536)])


@given(PAYLOADS, st.binary(min_size=4, max_size=4))
def test_a_client_frame_is_final_and_masked_with_its_key(payload: bytes, key: bytes) -> None:
    frame = client_frame(1, payload, key)
    assert frame[0] == 0x81
    assert unmask_plainly(frame) == (1, payload)


@pytest.mark.parametrize("size", SIZES)
async def test_messages_of_every_length_class_go_both_ways(size: int) -> None:
    text = ("é" if size % 2 else "a") * size
    async with server(echo) as url:
        ws = await LightSocket.connect(url)
        await ws.send(text)
        assert await asyncio.wait_for(ws.recv(), 5) == text
        await ws.send(text[:10])
        assert await asyncio.wait_for(ws.recv(decode=False), 5) == text[:10].encode()
        await ws.close()


async def test_a_fragmented_message_arrives_whole() -> None:
    async def fragments(ws: ServerConnection) -> None:
        await ws.send(["one ", "two ", "three"])
        await ws.send("after")
        await ws.wait_closed()

    async with server(fragments) as url:
        ws = await LightSocket.connect(url)
        assert await asyncio.wait_for(ws.recv(), 5) == "one two three"
        assert await asyncio.wait_for(ws.recv(), 5) == "after"
        await ws.close()


async def test_a_ping_is_answered_with_its_payload() -> None:
    answered = asyncio.get_running_loop().create_future()

    async def pinging(ws: ServerConnection) -> None:
        latency = await asyncio.wait_for(await ws.ping(b"abc"), 5)
        answered.set_result(latency)
        await ws.wait_closed()

    async with server(pinging, ping_interval=None) as url:
        ws = await LightSocket.connect(url)
        assert await asyncio.wait_for(answered, 5) >= 0
        await ws.close()


@pytest.mark.parametrize(("code", "kind"), [(1000, ConnectionClosedOK), (4000, ConnectionClosedError)])
async def test_the_servers_close_ends_recv(code: int, kind: type[ConnectionClosed]) -> None:
    async def closing(ws: ServerConnection) -> None:
        await ws.send("last")
        await ws.close(code, "bye")

    async with server(closing) as url:
        ws = await LightSocket.connect(url)
        assert await asyncio.wait_for(ws.recv(), 5) == "last"
        with pytest.raises(kind) as raised:
            await asyncio.wait_for(ws.recv(), 5)
        assert f"{code} bye" in raised.value.__notes__
        with pytest.raises(kind):
            await ws.send("too late")


async def test_the_clients_close_is_a_clean_1000() -> None:
    seen = asyncio.get_running_loop().create_future()

    async def watching(ws: ServerConnection) -> None:
        try:
            await ws.recv()
        except ConnectionClosed as exc:
            seen.set_result(exc)

    async with server(watching) as url:
        ws = await LightSocket.connect(url)
        await asyncio.wait_for(ws.close(), 5)
        closed = await asyncio.wait_for(seen, 5)
        assert isinstance(closed, ConnectionClosedOK)
        assert closed.rcvd is not None and closed.rcvd.code == 1000


@pytest.mark.logs_warnings  # the refused connection drops without a close: the echo server logs its end
async def test_a_server_agreeing_to_deflate_is_refused_and_one_declining_is_fine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with server(echo, compression="deflate") as url:
        with pytest.raises(InvalidHandshake, match="does not decompress"):
            await LightSocket.connect(url, offer_deflate=True)
        ws = await LightSocket.connect(url)  # not offered: plain frames
        await ws.send("plain")
        assert await asyncio.wait_for(ws.recv(), 5) == "plain"
        await ws.close()
    async with server(echo, compression=None) as url:
        ws = await LightSocket.connect(url, offer_deflate=True)  # offered as browsers do, declined
        await ws.send("declined")
        assert await asyncio.wait_for(ws.recv(), 5) == "declined"
        await ws.close()
    failed = [r for r in caplog.records if r.name == "websockets.server" and r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in failed] == ["connection handler failed"]  # the refused one alone


async def test_a_refused_upgrade_is_an_invalid_handshake() -> None:
    async def plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    listening = await asyncio.start_server(plain_http, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        with pytest.raises(InvalidHandshake, match="403"):
            await LightSocket.connect(f"ws://127.0.0.1:{port}/")


class Wire:
    """A transport that records what the client writes."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def server_frame(opcode: int, payload: bytes, final: bool = True) -> bytes:
    first = (0x80 if final else 0) | opcode
    size = len(payload)
    if size < 126:
        return bytes([first, size]) + payload
    if size < 1 << 16:
        return bytes([first, 126]) + struct.pack("!H", size) + payload
    return bytes([first, 127]) + struct.pack("!Q", size) + payload


def opened(socket: LightSocket) -> Wire:
    wire = Wire()
    socket.transport = wire  # type: ignore[assignment]
    socket._opened.set_result(b"HTTP/1.1 101\r\n\r\n")
    return wire


async def test_frames_split_at_every_byte_arrive_whole_and_in_order() -> None:
    socket = LightSocket()
    wire = opened(socket)
    messages = [b"", b"a" * 125, b"b" * 126, b"c" * 70_000]
    stream = b"".join(server_frame(1, m) for m in messages)
    stream += server_frame(1, b"frag", final=False) + server_frame(9, b"hi") + server_frame(0, b"ment")
    for i in range(len(stream)):
        socket.data_received(stream[i : i + 1])
    got = [await asyncio.wait_for(socket.recv(decode=False), 1) for _ in range(len(messages) + 1)]
    assert got == [*messages, b"fragment"]
    assert [unmask_plainly(frame) for frame in wire.written] == [(10, b"hi")]


async def test_a_masked_server_frame_fails_the_connection_with_1002() -> None:
    socket = LightSocket()
    wire = opened(socket)
    socket.data_received(client_frame(1, b"masked"))
    with pytest.raises(ConnectionClosedError) as raised:
        await asyncio.wait_for(socket.recv(), 1)
    assert "a server's frames are not masked" in raised.value.__notes__
    assert unmask_plainly(wire.written[-1]) == (8, struct.pack("!H", 1002))
    assert wire.closed


def test_the_client_runs_on_uvloop_as_the_generator_does() -> None:
    uvloop = pytest.importorskip("uvloop", reason="uvloop comes with uvicorn[standard]")

    async def round_trip() -> str | bytes:
        async with server(echo) as url:
            ws = await LightSocket.connect(url)
            await ws.send("on uvloop")
            answer = await asyncio.wait_for(ws.recv(), 5)
            await ws.close()
            return answer

    assert uvloop.run(round_trip()) == "on uvloop"
