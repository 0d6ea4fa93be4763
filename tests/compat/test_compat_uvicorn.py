"""server.compat.uvicorn: the installed uvicorn has what the server relies on, the shared-frame writer
writes the bytes of RFC 6455's text frame, only while the connection is plainly open, and the direct
close does not wait for the peer to read.

The frame is checked against a deliberately plain reading of RFC 6455 section 5.2 (a server's frames are
unmasked) and against the websockets library's own server protocol; the writer runs in a real uvicorn
server on port 0 with a real websockets client.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.protocol import State
from websockets.server import ServerProtocol

from server.compat import installed
from server.compat.uvicorn import SharedFrameProtocol, framed, missing, missing_state, shared_writer
from server.engine.outbox import Outbox
from tests.support.waiting import until


def rfc6455_text_frame(text: str) -> bytes:
    payload = text.encode("utf-8")
    size = len(payload)
    if size < 126:
        header = bytes([0x81, size])
    elif size < 1 << 16:
        header = bytes([0x81, 126]) + struct.pack("!H", size)
    else:
        header = bytes([0x81, 127]) + struct.pack("!Q", size)
    return header + payload


def websockets_text_frame(text: str) -> bytes:
    protocol = ServerProtocol()
    protocol.state = State.OPEN
    protocol.send_text(text.encode())
    return b"".join(protocol.data_to_send())


async def test_the_installed_uvicorn_has_what_the_server_relies_on() -> None:
    protocol, _ = _open_protocol()
    gaps = missing() + missing_state(protocol)
    assert not gaps, f"the server does not fit uvicorn {installed('uvicorn')}: " + "; ".join(gaps)


def test_the_compatibility_check_names_what_is_missing() -> None:
    """The checker itself works: an object without the protocol's state is reported, attribute by
    attribute, with the installed version."""
    gaps = missing_state(object())
    assert len(gaps) == 8 and all(installed("uvicorn") in gap for gap in gaps)
    assert any("'writable'" in gap for gap in gaps)


@given(
    st.text(max_size=300) | st.sampled_from(["a" * 125, "a" * 126, "b" * 65535, "c" * 65536, "é" * 70_000])
)
def test_a_frame_is_rfc6455s_unmasked_final_text_frame(text: str) -> None:
    assert framed(text.encode()) == rfc6455_text_frame(text) == websockets_text_frame(text)


def test_the_same_text_is_framed_once_for_all_its_recipients() -> None:
    data = b"x" * 30_000
    first = framed(data)
    assert framed(data) is first
    other = framed(b"y" * 30_000)
    assert other is not first and other == rfc6455_text_frame("y" * 30_000)
    # Equal but not the same object (another batch): framed again, to the same bytes.
    again = framed(b"".join([b"x"] * 30_000))
    assert again is not first and again == first
    # The empty frame, framed first of all, is not mistaken for "already framed".
    assert framed(b"") == rfc6455_text_frame("")


@contextlib.asynccontextmanager
async def serving(app: Callable[..., Any], compression: bool) -> AsyncIterator[str]:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        ws=SharedFrameProtocol,
        ws_per_message_deflate=compression,
        lifespan="off",
        log_config=None,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:

        def listening() -> bool:
            assert not serving.done(), "the server stopped before it listened"
            return bool(server.started)

        await until(listening, what="the server listening")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"ws://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)


class Recorder:
    """An ASGI app that accepts, then hands the scope's writer to the test."""

    def __init__(self) -> None:
        self.ready: asyncio.Future[tuple[Callable[[bytes], bool] | None, Any]] = (
            asyncio.get_running_loop().create_future()
        )
        self.disconnected = asyncio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "websocket"
        await receive()
        await send({"type": "websocket.accept"})
        self.ready.set_result((shared_writer(scope), send))
        while (await receive())["type"] != "websocket.disconnect":
            pass
        self.disconnected.set()


async def test_frames_written_directly_reach_the_client_whole_and_in_order() -> None:
    app = Recorder()
    async with serving(app, compression=False) as url, connect(url, compression=None, max_size=None) as ws:
        write, _ = await asyncio.wait_for(app.ready, 5)
        assert write is not None
        texts = ["{}", "a" * 125, "b" * 126, '{"view":"' + "é" * 40_000 + '"}', "c" * 70_000]
        assert all(write(text.encode()) for text in texts)
        assert [await asyncio.wait_for(ws.recv(), 5) for _ in texts] == texts


async def test_a_compressing_connection_is_left_to_asgi() -> None:
    app = Recorder()
    deflate = [ClientPerMessageDeflateFactory()]
    async with serving(app, compression=True) as url, connect(url, extensions=deflate) as ws:
        write, send = await asyncio.wait_for(app.ready, 5)
        assert write is not None
        assert ws.protocol.extensions, "the client and server agreed on permessage-deflate"
        assert write(b"plain") is False
        await send({"type": "websocket.send", "text": "compressed " * 100})
        assert await asyncio.wait_for(ws.recv(), 5) == "compressed " * 100


async def test_a_closed_connection_is_not_written() -> None:
    app = Recorder()
    async with serving(app, compression=False) as url:
        async with connect(url, compression=None) as ws:
            write, _ = await asyncio.wait_for(app.ready, 5)
            assert write is not None
        await asyncio.wait_for(app.disconnected.wait(), 5)
        assert ws.state is State.CLOSED
        assert write(b"too late") is False


async def test_a_full_buffer_is_not_written_past() -> None:
    app = Recorder()
    async with serving(app, compression=False) as url, connect(url, compression=None, max_size=None) as ws:
        write, _ = await asyncio.wait_for(app.ready, 5)
        assert write is not None
        ws.transport.pause_reading()  # the client stops reading: the server's buffer fills
        chunk = "z" * (1 << 20)
        written = 0
        while write(chunk.encode()):
            written += 1
            assert written < 1000, "the transport never paused writing"
        assert not write.__self__.writable.is_set()  # type: ignore[attr-defined]
        ws.transport.resume_reading()
        received = [await asyncio.wait_for(ws.recv(), 10) for _ in range(written)]
        assert received == [chunk] * written


async def test_the_outbox_writes_directly_and_falls_back_to_send_when_refused() -> None:
    written: list[bytes] = []
    sent: list[bytes] = []
    allow = True

    def write(text: bytes) -> bool:
        if allow:
            written.append(text)
        return allow

    async def send(text: bytes) -> None:
        sent.append(text)

    async def close(code: int, reason: str) -> None:
        raise AssertionError("not closed")

    outbox = Outbox(send, close, limit=4, write=write)
    outbox.put(b"first")  # before start: queued, sent through ASGI once the writer runs
    outbox.start()
    await asyncio.sleep(0)
    outbox.put(b"a")  # the writer sleeps on an empty queue: written directly
    allow = False
    outbox.put(b"b")  # refused: sent through ASGI, after what went before
    await asyncio.sleep(0)
    assert written == [b"a"] and sent == [b"first", b"b"]
    await outbox.stop()


class _Wire:
    """A transport that records each write call."""

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []
        self.closing = False
        self.aborted = False
        self.reading_resumed = False

    def write(self, data: bytes) -> None:
        self.calls.append([data])

    def writelines(self, frames: list[bytes]) -> None:
        self.calls.append(list(frames))

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.aborted = self.closing = True

    def close(self) -> None:
        self.closing = True

    def resume_reading(self) -> None:
        self.reading_resumed = True


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    return None


def _open_protocol() -> tuple[SharedFrameProtocol, _Wire]:
    from uvicorn.server import ServerState

    config = uvicorn.Config(_no_app, ws=SharedFrameProtocol, ws_per_message_deflate=False, log_config=None)
    config.load()
    protocol = SharedFrameProtocol(config, ServerState(), {})
    wire = _Wire()
    protocol.transport = wire  # type: ignore[assignment]
    protocol.handshake_complete = True
    protocol.conn.state = State.OPEN
    return protocol, wire


async def test_the_frames_of_one_turn_go_out_in_one_write_call_in_order() -> None:
    first, first_wire = _open_protocol()
    second, second_wire = _open_protocol()
    assert first.write_text(b'{"type":"accepted"}') and first.write_text(b'{"type":"events"}')
    assert second.write_text(b'{"type":"events"}')
    assert first_wire.calls == [] and second_wire.calls == []  # corked until the turn ends
    await asyncio.sleep(0)
    assert first_wire.calls == [[framed(b'{"type":"accepted"}'), framed(b'{"type":"events"}')]]
    assert second_wire.calls == [[framed(b'{"type":"events"}')]]
    assert first.write_text(b"next")  # a later turn: corked and flushed again
    await asyncio.sleep(0)
    assert first_wire.calls[-1] == [framed(b"next")]


async def test_a_connection_past_the_cork_limit_is_written_at_once() -> None:
    from server.compat.uvicorn import CORK_BYTES

    protocol, wire = _open_protocol()
    chunk = b"x" * (CORK_BYTES // 2 - 4)  # two frames, headers and all, fill the limit exactly
    assert protocol.write_text(chunk) and protocol.write_text(chunk)
    assert wire.calls == []
    assert protocol.write_text(b"y")  # past the limit: written now, in one call
    assert wire.calls == [[framed(chunk), framed(chunk), framed(b"y")]]
    await asyncio.sleep(0)
    assert len(wire.calls) == 1


async def test_frames_corked_on_a_connection_that_closes_are_dropped() -> None:
    protocol, wire = _open_protocol()
    assert protocol.write_text(b"late")
    wire.closing = True
    await asyncio.sleep(0)
    assert wire.calls == []


async def test_a_send_through_asgi_comes_after_the_frames_corked_before_it() -> None:
    app = Recorder()
    async with serving(app, compression=False) as url, connect(url, compression=None) as ws:
        write, send = await asyncio.wait_for(app.ready, 5)
        assert write is not None
        assert write(b"one") and write(b"two")
        await send({"type": "websocket.send", "text": "three"})
        assert [await asyncio.wait_for(ws.recv(), 5) for _ in range(3)] == ["one", "two", "three"]


def _close_frame(code: int, reason: str) -> bytes:
    payload = struct.pack("!H", code) + reason.encode()
    return bytes([0x88, len(payload)]) + payload


async def test_a_direct_close_goes_out_behind_the_corked_frames_and_ends_the_session_at_once() -> None:
    protocol, wire = _open_protocol()
    protocol.read_paused = True
    assert protocol.write_text(b"pending")
    assert protocol.close_now(1013, "too slow to read", 5.0)
    # What was corked first, then the close frame, without waiting for the transport to take more.
    assert wire.calls == [[framed(b"pending")], [_close_frame(1013, "too slow to read")]]
    assert protocol.queue.get_nowait() == {
        "type": "websocket.disconnect",
        "code": 1013,
        "reason": "too slow to read",
    }
    assert protocol.close_sent and wire.reading_resumed  # the client's answer to the close can be read
    assert not protocol.close_now(1013, "again", 5.0)  # once only
    assert not protocol.write_text(b"after")
    assert not wire.aborted


async def test_a_peer_that_never_answers_a_direct_close_is_cut_off_after_the_grace() -> None:
    protocol, wire = _open_protocol()
    assert protocol.close_now(1013, "too slow to read", 0.05)
    await asyncio.sleep(0.01)  # within the grace
    assert not wire.aborted
    await until(lambda: wire.aborted, 1, "the connection cut after the grace")


async def test_a_connection_not_plainly_open_is_not_closed_directly() -> None:
    protocol, wire = _open_protocol()
    wire.closing = True
    assert not protocol.close_now(1013, "too slow to read", 5.0)
    assert wire.calls == [] and protocol.queue.empty()


async def test_the_outbox_closes_directly_when_offered_and_through_asgi_otherwise() -> None:
    closed: list[tuple[int, str]] = []
    direct: list[tuple[int, str]] = []

    async def send(data: bytes) -> None:
        return None

    async def close(code: int, reason: str) -> None:
        closed.append((code, reason))

    def close_now(code: int, reason: str) -> bool:
        direct.append((code, reason))
        return True

    offered = Outbox(send, close, 1, close_now=close_now)
    offered.put(b"a")
    offered.put(b"b")  # past the limit
    await asyncio.sleep(0)
    assert direct == [(1013, "too slow to read")] and closed == []
    refused = Outbox(send, close, 1, close_now=lambda code, reason: False)
    refused.put(b"a")
    refused.put(b"b")
    await asyncio.sleep(0)
    assert closed == [(1013, "too slow to read")]
