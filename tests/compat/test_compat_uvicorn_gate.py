"""server.compat.uvicorn_gate: the installed uvicorn has what the gate relies on, and the gate, in a real
uvicorn server on port 0, answers what uvicorn answers (keep-alive, pipelined requests, bodies,
websockets) while it bounds heads, request times and connections, and still hears a websocket close.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from websockets.asyncio.client import connect

from server.compat import installed
from server.compat.uvicorn import SharedFrameProtocol
from server.compat.uvicorn_gate import (
    MOST_REQUESTS,
    SEND_PROGRESS_BYTES,
    GatedHttpProtocol,
    _TransportView,
    gated_http,
    missing,
)
from server.connections import ConnectionLimits, Limits
from tests.support.waiting import until

HEAD = 1024
TIMEOUT = 0.3


def limits(**changed: Any) -> ConnectionLimits:
    fields: dict[str, Any] = dict(
        max_connections=50,
        max_per_address=20,
        max_head_bytes=HEAD,
        request_timeout=TIMEOUT,
        send_timeout=TIMEOUT,
    )
    fields.update(changed)
    return ConnectionLimits(Limits(**fields))


BIG = 1 << 20
HUGE = 32 << 20  # more than the kernel's socket buffers take, whatever their tuning
started: list[str] = []  # the paths of the HTTP requests the app was given, in order


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """HTTP: answers "<path> <body length>" once the body is read (/slow: half a second later; /refuse:
    at once, without reading the body; /big, /huge: BIG, HUGE bytes). Websocket: echoes text."""
    if scope["type"] == "http":
        started.append(scope["path"])
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        while (message := await receive())["type"] == "websocket.receive":
            await send({"type": "websocket.send", "text": message["text"]})
        return
    size = 0
    if scope["path"] != "/refuse":
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
    if scope["path"] == "/slow":
        await asyncio.sleep(0.5)
    sizes = {"/big": BIG, "/huge": HUGE}
    body = b"b" * sizes[scope["path"]] if scope["path"] in sizes else f"{scope['path']} {size}".encode()
    status = 413 if scope["path"] == "/refuse" else 200
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serving(
    counts: ConnectionLimits, http: type[asyncio.Protocol] | None = None
) -> AsyncIterator[tuple[uvicorn.Server, int]]:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        http=http or gated_http(counts),
        ws=SharedFrameProtocol,
        ws_per_message_deflate=False,
        lifespan="off",
        log_config=None,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:

        def listening() -> bool:
            assert not task.done(), "the server stopped before it listened"
            return bool(server.started)

        await until(listening, what="the server listening")
        yield server, server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


class Raw:
    """A raw TCP client: writes bytes, reads responses by their content-length, or up to the close."""

    opened: list[Raw] = []

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, source: str = "127.0.0.1") -> Raw:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        client = cls(reader, writer)
        cls.opened.append(client)
        return client

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self) -> tuple[int, bytes]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 5)
        status = int(head.split(b" ", 2)[1])
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return status, await asyncio.wait_for(self.reader.readexactly(length), 5)

    async def closed_within(self, seconds: float) -> bool:
        """True when the server closes the connection within `seconds` (what it sent meanwhile is read)."""
        try:
            async with asyncio.timeout(seconds):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionResetError:
            pass
        return True

    def close(self) -> None:
        self.writer.close()


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    started.clear()
    yield
    while unread:
        unread.pop().close()
    while Raw.opened:
        Raw.opened.pop().close()
    await asyncio.sleep(0)


def get(path: str, **headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "host: test", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def head_of(size: int) -> bytes:
    """A GET whose head is exactly `size` bytes (its padding header makes up the difference)."""
    bare = get("/", x="")
    return get("/", x="a" * (size - len(bare)))


async def settled(condition: Any, seconds: float = 5.0) -> None:
    await until(condition, seconds)


def test_the_installed_uvicorn_has_what_the_gate_relies_on() -> None:
    gaps = missing()
    assert not gaps, f"the gate does not fit uvicorn {installed('uvicorn')}: " + "; ".join(gaps)


def test_the_compatibility_check_names_what_is_missing() -> None:
    gaps = missing(object)
    assert all(installed("uvicorn") in gap for gap in gaps)
    for name in ("on_headers_complete", "on_message_complete", "on_response_complete", "'app_state'"):
        assert any(name in gap for gap in gaps), name


async def test_a_websocket_counts_until_it_closes_and_its_frames_skip_the_gate() -> None:
    counts = limits()
    async with serving(counts) as (server, port):
        async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
            await ws.send("hello")
            assert await asyncio.wait_for(ws.recv(), 5) == "hello"
            assert counts.open == 1 and counts.by_address == {"127.0.0.1": 1}
            (protocol,) = server.server_state.connections
            assert isinstance(protocol, SharedFrameProtocol)
            # The gate stays the transport's protocol (it hears the close), but the transport hands data
            # straight to the websocket protocol, and the protocol writes to the transport itself.
            real = protocol.transport
            assert not isinstance(real, _TransportView)
            gate = real.get_protocol()
            assert isinstance(gate, GatedHttpProtocol) and gate.inner is protocol
            assert gate.data_received == protocol.data_received
            await asyncio.sleep(TIMEOUT * 2)  # no request deadline once upgraded
            await ws.send("still here")
            assert await asyncio.wait_for(ws.recv(), 5) == "still here"
        await settled(lambda: counts.open == 0 and not server.server_state.connections)
    assert counts.by_address == {} and not any(counts.refused.values())


class CountingGate(GatedHttpProtocol):
    """The gate, counting the calls of its own data_received."""

    calls = 0

    def data_received(self, data: bytes) -> None:
        CountingGate.calls += 1
        super().data_received(data)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_after_an_upgrade_the_transport_hands_frames_to_the_websocket_protocol_itself(loop: str) -> None:
    """uvloop looks a protocol's data_received up once, when the protocol is set: the gate sets itself
    again after the upgrade, so that the websocket protocol's own method is the one looked up."""
    counts = limits()
    gate = type("Gate", (CountingGate,), {"limits": counts})

    async def main() -> None:
        async with serving(counts, gate) as (_, port):
            async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
                await ws.send("first")
                assert await asyncio.wait_for(ws.recv(), 5) == "first"
                before = CountingGate.calls
                assert before >= 1  # the handshake came through the gate
                for n in range(5):
                    await ws.send(f"frame {n}")
                    assert await asyncio.wait_for(ws.recv(), 5) == f"frame {n}"
                assert CountingGate.calls == before
            await settled(lambda: counts.open == 0)

    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())


async def test_keep_alive_and_pipelined_requests_are_answered_and_an_idle_connection_closes_uncounted() -> (
    None
):
    counts = limits()
    async with serving(counts) as (_, port):
        client = await Raw.open(port)
        await client.send(get("/one"))
        assert await client.response() == (200, b"/one 0")
        await asyncio.sleep(TIMEOUT / 2)
        await client.send(get("/two"))
        assert await client.response() == (200, b"/two 0")
        # Three at once, one with a body, one answered slower than the request deadline.
        post = b"POST /post HTTP/1.1\r\nhost: test\r\ncontent-length: 5\r\n\r\nabcde"
        await client.send(get("/slow") + post + get("/three"))
        assert [await client.response() for _ in range(3)] == [
            (200, b"/slow 0"),
            (200, b"/post 5"),
            (200, b"/three 0"),
        ]
        assert await client.closed_within(TIMEOUT * 4)  # idle after its last response
        # The same as a connection's first bytes, in one write: all of it reaches the HTTP protocol.
        first = await Raw.open(port)
        await first.send(post + get("/slow") + get("/three"))
        assert [await first.response() for _ in range(3)] == [
            (200, b"/post 5"),
            (200, b"/slow 0"),
            (200, b"/three 0"),
        ]
    assert not any(counts.refused.values())


async def test_a_head_is_bounded_in_size_where_ever_the_reads_split_it() -> None:
    counts = limits()
    async with serving(counts) as (_, port):
        exact = await Raw.open(port)
        await exact.send(head_of(HEAD))
        assert (await exact.response())[0] == 200
        over = await Raw.open(port)
        await over.send(head_of(HEAD + 1))
        assert (await over.response())[0] == 431
        assert await over.closed_within(1)
        # The same head in small pieces (its end split between two reads) is served.
        pieces = await Raw.open(port)
        whole = head_of(HEAD)
        for start in range(0, len(whole), 7):
            await pieces.send(whole[start : start + 7])
            await asyncio.sleep(0)  # a turn for the server to read each piece alone
        assert (await pieces.response())[0] == 200
        # After a response, the next head is bounded too.
        await pieces.send(head_of(HEAD + 100))
        assert (await pieces.response())[0] == 431
        # Blank lines before a request (which the parser skips) do not hide a long head.
        sneaky = await Raw.open(port)
        await sneaky.send(b"\r\n\r\n" + get("/", x="a" * (4 * HEAD)))
        assert await sneaky.closed_within(1)
    assert counts.refused["head_too_large"] == 3


async def test_requests_that_stall_are_closed_at_the_deadline_and_counted() -> None:
    counts = limits()
    async with serving(counts) as (_, port):
        silent = await Raw.open(port)  # sends nothing at all
        half_head = await Raw.open(port)
        await half_head.send(b"GET / HTTP/1.1\r\nhost: te")
        half_body = await Raw.open(port)
        await half_body.send(b"POST / HTTP/1.1\r\nhost: test\r\ncontent-length: 10\r\n\r\nabc")
        refused_body = await Raw.open(port)  # answered at once, but its body never comes
        await refused_body.send(b"POST /refuse HTTP/1.1\r\nhost: test\r\ncontent-length: 10\r\n\r\n")
        assert (await refused_body.response())[0] == 413
        second_head = await Raw.open(port)
        await second_head.send(get("/first"))
        assert (await second_head.response())[0] == 200
        await second_head.send(b"GET /second HTTP/1.1\r\n")
        clients = (silent, half_head, half_body, refused_body, second_head)
        started = asyncio.get_running_loop().time()
        for client in clients:
            assert await client.closed_within(TIMEOUT * 5)
        assert asyncio.get_running_loop().time() - started >= TIMEOUT / 2
        for client in clients:
            client.close()
        await settled(lambda: counts.open == 0)
    assert counts.refused["head_timeout"] == 3 and counts.refused["body_timeout"] == 2


@pytest.mark.logs_warnings  # refusals are logged at warning
async def test_connections_over_the_limits_are_closed_at_once_and_their_slots_come_back() -> None:
    counts = limits(max_connections=3, max_per_address=2)
    async with serving(counts) as (_, port):
        first = [await Raw.open(port) for _ in range(2)]
        third = await Raw.open(port)
        assert await third.closed_within(1)  # a third from 127.0.0.1
        other = await Raw.open(port, source="127.0.0.2")
        await other.send(get("/other"))
        assert await other.response() == (200, b"/other 0")
        fourth = await Raw.open(port, source="127.0.0.3")
        assert await fourth.closed_within(1)  # three open on the node
        first[0].close()
        await settled(lambda: counts.open == 2)
        again = await Raw.open(port)
        await again.send(get("/again"))
        assert await again.response() == (200, b"/again 0")
        for client in Raw.opened:
            client.close()
        await settled(lambda: counts.open == 0)
    assert counts.refused["per_address"] == 1 and counts.refused["global"] == 1
    assert counts.by_address == {}


class TrackingGate(GatedHttpProtocol):
    """The gate, keeping weak references to itself and its HTTP protocol."""

    made: list[weakref.ref[Any]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        TrackingGate.made.append(weakref.ref(self))

    def _start(self, received: bytes) -> None:
        super()._start(received)
        TrackingGate.made.append(weakref.ref(self.inner))


async def test_a_closed_connections_gate_and_protocol_are_freed_without_the_garbage_collector() -> None:
    """Under a flood of short connections, garbage left for the collector is collected in pauses that
    grow with every connection still open: the gate leaves none."""
    counts = limits()
    gate = type("Gate", (TrackingGate,), {"limits": counts})
    async with serving(counts, gate) as (_, port):
        gc.collect()
        gc.disable()
        try:
            for path in ("/answered", "/refuse"):
                client = await Raw.open(port)
                await client.send(get(path, connection="close"))
                await client.response()
                assert await client.closed_within(1)
            timed_out = await Raw.open(port)
            await timed_out.send(b"GET / HTTP/1.1\r\n")
            assert await timed_out.closed_within(TIMEOUT * 5)
            await settled(lambda: counts.open == 0)
            await settled(lambda: all(ref() is None for ref in TrackingGate.made))
            assert len(TrackingGate.made) == 5  # three gates; no HTTP protocol for a head never finished
            assert [ref() for ref in TrackingGate.made] == [None] * 5
        finally:
            gc.enable()


async def test_blank_lines_before_a_first_request_are_not_kept() -> None:
    counts = limits()
    async with serving(counts) as (server, port):
        client = await Raw.open(port)
        for _ in range(64):
            await client.send(b"\r\n" * 32 * 1024)
        (gate,) = server.server_state.connections  # no HTTP protocol yet: the gate stands for it
        assert isinstance(gate, GatedHttpProtocol) and gate._early == []
        await client.send(get("/after", connection="close"))
        assert await client.response() == (200, b"/after 0")


async def test_uvicorns_shutdown_closes_connections_that_have_not_sent_a_whole_head() -> None:
    counts = limits(request_timeout=30)
    async with serving(counts) as (server, port):
        silent = await Raw.open(port)
        half = await Raw.open(port)
        await half.send(b"GET / HTTP/1.1\r\nhost: te")
        await settled(lambda: counts.open == 2)
        server.should_exit = True
        assert await silent.closed_within(3) and await half.closed_within(3)
    assert counts.open == 0 and not any(counts.refused.values())


def test_the_gate_is_a_class_uvicorn_can_build() -> None:
    counts = limits()
    built = gated_http(counts)
    assert issubclass(built, GatedHttpProtocol) and built.limits is counts


unread: list[socket.socket] = []


async def never_reading(port: int, data: bytes) -> socket.socket:
    """A client with a 4 KiB receive window that sends `data` and never reads (closed after the test)."""
    sock = socket.socket()
    unread.append(sock)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, data)
    return sock


def gates(server: uvicorn.Server) -> list[GatedHttpProtocol]:
    """The gates of the server's HTTP connections (through the view their HTTP protocol writes to)."""
    found = []
    for protocol in server.server_state.connections:
        transport = getattr(protocol, "transport", None)
        if isinstance(transport, _TransportView):
            found.append(transport._gate)
    return found


async def test_pipelined_requests_wait_unread_in_the_socket_while_one_is_answered() -> None:
    counts = limits(send_timeout=30)
    async with serving(counts) as (server, port):
        sent = get("/big") * 2000
        sock = await never_reading(port, sent)
        await asyncio.sleep(TIMEOUT)
        # Answered one after the other until the socket's buffers are full (the kernel takes a few MiB),
        # then the one whose answer waits: the others are not parsed, their bytes held or in the socket.
        assert 1 <= len(started) < 20
        (gate,) = gates(server)
        inner = gate.inner
        assert isinstance(inner, HttpToolsProtocol) and not inner.pipeline
        assert not gate.transport.is_reading()
        backlog = gate._backlog
        assert backlog is not None and len(backlog) - gate._backlog_at <= len(sent) - len(started) * len(
            get("/big")
        )
        sock.close()
        await settled(lambda: counts.open == 0)
    assert not any(counts.refused.values())


async def test_many_pipelined_requests_are_all_answered_in_order_to_a_client_that_reads() -> None:
    counts = limits()
    async with serving(counts) as (_, port):
        client = await Raw.open(port)
        post = b"POST /post HTTP/1.1\r\nhost: test\r\ncontent-length: 9\r\n\r\n\r\n\r\nabcde"
        requests = [get(f"/{n}") if n % 3 else post for n in range(300)]
        await client.send(b"".join(requests))
        answers = [await client.response() for _ in requests]
        assert answers == [(200, f"/{n} 0".encode() if n % 3 else b"/post 9") for n in range(300)]
    assert not any(counts.refused.values())


async def test_requests_parsed_past_the_limit_behind_a_chunked_body_are_dropped() -> None:
    counts = limits()
    async with serving(counts) as (_, port):
        client = await Raw.open(port)
        chunked = b"POST /chunked HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n"
        await client.send(chunked)
        await settled(lambda: started == ["/chunked"])  # its head read alone
        # The body's end and three more requests in one read: the parser cannot stop within it.
        await client.send(b"3\r\nabc\r\n0\r\n\r\n" + get("/one") + get("/two") + get("/three"))
        answers = [await client.response() for _ in range(MOST_REQUESTS)]
        assert answers == [(200, b"/chunked 3"), (200, b"/one 0")]
        assert await client.closed_within(1)
        assert started == ["/chunked", "/one"]


async def test_an_answer_not_read_is_cut_at_the_send_deadline_and_counted() -> None:
    counts = limits(request_timeout=30)
    async with serving(counts) as (_, port):
        loop = asyncio.get_running_loop()
        began = loop.time()
        await never_reading(port, get("/big") * 100)
        await never_reading(port, get("/huge", connection="close"))  # closed once sent: never
        await settled(lambda: counts.open == 0, TIMEOUT * 10)
        assert loop.time() - began >= TIMEOUT
        assert counts.refused["send_timeout"] == 2


async def test_a_client_that_reads_slowly_but_steadily_is_not_cut() -> None:
    counts = limits(request_timeout=30)
    async with serving(counts) as (_, port):
        client = await Raw.open(port)
        await client.send(get("/big"))
        received = 0
        head = await client.reader.readuntil(b"\r\n\r\n")
        while received < BIG:
            # Half the deadline between reads of twice what the deadline asks for.
            received += len(await client.reader.readexactly(min(2 * SEND_PROGRESS_BYTES, BIG - received)))
            await asyncio.sleep(TIMEOUT / 2)
        assert head.startswith(b"HTTP/1.1 200 ") and received == BIG
        await client.send(get("/after"))
        assert await client.response() == (200, b"/after 0")
    assert not any(counts.refused.values())
