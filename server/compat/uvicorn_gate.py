"""uvicorn: a gate in front of its httptools protocol that bounds every connection it accepts.

`gated_http(limits)` is the protocol class given to `uvicorn.Config(http=...)`: uvicorn builds one per
accepted connection. It counts the connection against the node's limits (server.connections) and closes
it at once when refused. Once the first request's head has come whole it creates uvicorn's HTTP protocol
(a connection that never sends one costs the gate alone) and passes it everything the transport says,
watching each request on the way: its head (request line and headers) must end within
`max_head_bytes` (else 431, then close), and the whole request, head and body, must arrive within
`request_timeout` of the connection's start or of the previous response (else close). Bodies are never
parsed here: httptools does that, and says when a head and a request are complete. A connection closed
while idle between requests (keep-alive) is not counted as refused, as before.

One request at a time: what a read brings is passed on in pieces, each up to the end of a head
(`\r\n\r\n`, which is where llhttp ends one), and once a whole request waits for its response the rest
is held and the socket's reading paused until the response is complete; pipelined requests wait unread
in the socket. (A piece that ends a body may also hold the next request's head: then uvicorn queues that
one, so at most one request is parsed ahead of the one answered.) And one deadline for sending: while
the transport's write buffer is over its high-water mark, or the connection is closing with bytes
unsent, the client must take `SEND_PROGRESS_BYTES` of them (or all) every `send_timeout` seconds, else
the connection is cut (`abort`: a plain close would wait for the buffer to drain, which a client that
never reads never allows).

A websocket stays counted until it closes: uvicorn upgrades a connection by handing the transport to
its websocket protocol (`transport.set_protocol`); the HTTP protocol holds a view of the transport whose
`set_protocol` makes the websocket protocol the gate's instead, so the gate still hears the close. Once
upgraded, the transport hands received data straight to the websocket protocol, which writes to the
transport itself: frames cost what they did without the gate.

What this relies on of uvicorn beyond its documented Config: `HttpToolsProtocol` (subclassed here to hear
when a head, a request and a response are complete, through `on_headers_complete` and
`on_message_complete`, httptools's parser callbacks uvicorn implements, and uvicorn's own
`on_response_complete`), its constructor's arguments, that it pauses and resumes reading through its
transport (the view combines that with the gate's own pause), that its upgrade goes through
`transport.set_protocol`, that its websocket protocol keeps its transport as `transport` (should it not,
frames go through the view: slower, still right), and that its shutdown closes what is in
`server_state.connections` with `shutdown()` (the gate is there until it has made the HTTP protocol).
`missing()` lists what the installed uvicorn lacks; tests/compat runs the gate in a real uvicorn server.
`ORCHESTRA_HTTP_GATE=off` runs plain uvicorn instead (server.ops.runner; docs/operations.md says which
limits then hold and which the proxy must).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from typing import Any, ClassVar, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from server.compat import installed
from server.connections import (
    BODY_TIMEOUT,
    HEAD_TIMEOUT,
    HEAD_TOO_LARGE,
    SEND_TIMEOUT,
    ConnectionLimits,
    address_key,
)

_HOOKS = ("on_headers_complete", "on_message_complete", "on_response_complete")
_CALLED = ("connection_made", "data_received", "eof_received", "connection_lost", "pause_writing")
_CONSTRUCTOR = ("config", "server_state", "app_state", "_loop")
_HEAD_END = b"\r\n\r\n"
# A head's end with the blank lines after it, which the parser skips: one piece, not one per blank line.
_PIECE_END = re.compile(rb"\r\n\r\n(?:\r\n)*")
# What the transport calls on the websocket protocol itself once a connection is handed over.
_HANDED = ("data_received", "eof_received", "pause_writing", "resume_writing")
# What a client whose answer waits in the write buffer must take of it every `send_timeout` seconds (all
# of it, when less is left): uvloop's and asyncio's low-water mark, so a client that reads at all does.
SEND_PROGRESS_BYTES = 16 * 1024
# Requests a connection may have parsed at once: the one answered and one behind it (only ever behind a
# request whose body ends in the same piece). The parser cannot stop within a read: a chunked body can
# hide more requests after it, and those are dropped.
MOST_REQUESTS = 2


def too_large_answer(most: int) -> bytes:
    """The whole answer to a head over `most` bytes: 431, with the body of protocol.md's errors."""
    body = json.dumps({"code": "too_large", "message": f"a request head may hold {most} bytes"}).encode()
    return (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    )


def missing(protocol: type = HttpToolsProtocol) -> list[str]:
    """What the gate relies on that the installed uvicorn's `protocol` lacks, each naming that version."""
    version = installed("uvicorn")
    found = [
        f"uvicorn {version}: HttpToolsProtocol has no {name}()"
        for name in _HOOKS + _CALLED + ("handle_websocket_upgrade",)
        if not callable(getattr(protocol, name, None))
    ]
    try:
        parameters = inspect.signature(protocol).parameters
    except (TypeError, ValueError):
        parameters = {}  # type: ignore[assignment]
    found += [
        f"uvicorn {version}: HttpToolsProtocol() takes no {name!r} argument"
        for name in _CONSTRUCTOR
        if name not in parameters
    ]
    if not isinstance(getattr(ServerState(), "connections", None), set):
        found.append(f"uvicorn {version}: ServerState has no set of connections")
    return found


class _TransportView:
    """The transport as the HTTP protocol sees it: the transport itself, but for `set_protocol` (which hands
    the connection to the new protocol through the gate), `close` (the gate's, within the send deadline)
    and pausing reading (combined with the gate's own pause)."""

    __slots__ = ("_gate", "_transport")

    def __init__(self, transport: asyncio.Transport, gate: GatedHttpProtocol) -> None:
        self._gate = gate
        self._transport = transport

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._gate.hand_over(cast(asyncio.Protocol, protocol), self)

    def close(self) -> None:
        self._gate.close()

    def pause_reading(self) -> None:
        self._gate.pause_inner(True)

    def resume_reading(self) -> None:
        self._gate.pause_inner(False)

    def __getattr__(self, name: str) -> Any:
        # The rest of asyncio.Transport (write, is_closing, get_extra_info, ...): the transport's own.
        return getattr(self._transport, name)


def _body_length(headers: list[tuple[bytes, bytes]]) -> int:
    """The body's length a request's content-length gives (llhttp has checked it); 0 if none."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


class _WatchedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol, telling its gate when a head, a request and a response are done."""

    gate: GatedHttpProtocol

    def on_headers_complete(self) -> None:
        gate = self.gate
        if gate.overflowed:
            return
        if not gate.head_complete(_body_length(self.headers)):
            # Beyond what may be parsed ahead: no request made; the last one made is the last answered.
            self.cycle.keep_alive = False
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self.gate.overflowed:  # a dropped request's body is not the last request's
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self.gate.overflowed:
            return
        super().on_message_complete()
        self.gate.request_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.gate.response_complete()


class GatedHttpProtocol(asyncio.Protocol):
    """One connection: counted against the limits, its requests' heads and times watched (see the
    module's docstring). Use `gated_http(limits)`, which binds the node's limits."""

    limits: ClassVar[ConnectionLimits]

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._built = (config, server_state, app_state, _loop)
        self.address: str | None = None  # None: refused (or not yet made)
        # uvicorn's protocol, once the first head has come whole; meanwhile the bytes received so far.
        self.inner: asyncio.Protocol = cast(asyncio.Protocol, None)
        self._early: list[bytes] | None = []
        self.transport: asyncio.Transport = cast(asyncio.Transport, None)
        self._loop: asyncio.AbstractEventLoop = cast(asyncio.AbstractEventLoop, None)
        self._timer: asyncio.TimerHandle | None = None
        # A request's head is awaited (its bytes counted) from the connection's start and from the end
        # of each request until the end of the next head.
        self._awaiting = True
        self._head_bytes = 0
        self._head_suffix = b""  # the last bytes of the head so far: its end may straddle two reads
        self._unanswered = 0  # requests whose head came and whose response is not complete yet
        self._answered = False
        self._handed = False  # upgraded: the websocket protocol has the connection
        # The bytes of the current request's body still to come, when its content-length says; and
        # whether the parser went past the requests a connection may have at once (see `head_complete`).
        self._body_left = 0
        self.overflowed = False
        # Received bytes held (from `_backlog_at` on) while a request is answered, reading paused meanwhile;
        # the last bytes passed on (a head's end may straddle two reads); whether the HTTP protocol asked
        # for reading paused, and whether it is.
        self._backlog: bytes | None = None
        self._backlog_at = 0
        self._passed_suffix = b""
        self._inner_paused = False
        self._read_paused = False
        # The send deadline: its timer, and the bytes unsent when it was set.
        self._send_timer: asyncio.TimerHandle | None = None
        self._unsent = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        address = address_key(transport.get_extra_info("peername"))
        limits = self.limits
        refused = limits.admit(address)
        if refused is not None:
            transport.close()
            limits.refuse(refused, address)
            return
        self.address = address
        self.transport = transport
        self._loop = self._built[3] or asyncio.get_running_loop()
        # Until uvicorn's protocol exists, uvicorn's shutdown closes the connection through the gate.
        self._built[1].connections.add(self)  # type: ignore[arg-type]
        self._arm()

    def _start(self, received: bytes) -> None:
        """The first head has come whole: uvicorn's protocol takes the connection, and what came so far."""
        config, server_state, app_state, loop = self._built
        server_state.connections.discard(self)
        inner = _WatchedHttp(config=config, server_state=server_state, app_state=app_state, _loop=loop)
        inner.gate = self
        self.inner = inner
        inner.connection_made(cast(asyncio.Transport, _TransportView(self.transport, self)))
        inner.data_received(received)

    def shutdown(self) -> None:
        """uvicorn's shutdown, for a connection that has not sent a whole head yet: closed."""
        self.close()

    def data_received(self, data: bytes) -> None:
        backlog = self._backlog
        if backlog is not None:
            # Reading is paused while a request is answered; a read that was under way waits as well.
            self._backlog, self._backlog_at = backlog[self._backlog_at :] + data, 0
            return
        self._feed(data, 0)

    def _feed(self, data: bytes, at: int) -> None:
        """Pass `data` on from `at`, a piece at a time: once a whole request waits for its response, the
        rest is held and reading paused (see the module's docstring)."""
        end = len(data)
        while at < end:
            cut = self._piece_end(data, at)
            piece = data if at == 0 and cut == end else data[at:cut]
            at = cut
            self._passed_suffix = (self._passed_suffix + piece[-3:])[-3:]
            self._take(piece)
            if self._handed or self.address is None or self.transport.is_closing():
                return  # after an upgrade, uvicorn's own protocol never read past the upgrade either
            if at < end and self._awaiting and self._unanswered:
                self._backlog, self._backlog_at = data, at
                self._apply_reading()
                return

    def _piece_end(self, data: bytes, at: int) -> int:
        """Where the piece of `data` from `at` ends: at the end of a body of known length, just past the
        next head's end while a head is awaited, else (a chunked body) at the end of `data`."""
        left = self._body_left
        if left:
            self._body_left = max(0, left - (len(data) - at))
            return min(len(data), at + left)
        if not self._awaiting:
            return len(data)
        if at == 0 and self._passed_suffix:
            straddling = (self._passed_suffix + data[:3]).find(_HEAD_END)
            if straddling >= 0:
                return straddling + len(_HEAD_END) - len(self._passed_suffix)
        found = _PIECE_END.search(data, at)
        return len(data) if found is None else found.end()

    def _release(self) -> None:
        """The response is complete: what was held is passed on, and reading resumed once all of it is."""
        backlog = self._backlog
        if backlog is None or self._unanswered or self.address is None or self.transport.is_closing():
            return
        self._backlog = None
        self._feed(backlog, self._backlog_at)
        if self._backlog is None:
            self._apply_reading()

    def pause_inner(self, paused: bool) -> None:
        """The HTTP protocol pauses or resumes reading (its own flow control): so be it, unless the gate
        holds data, when reading stays paused until it is passed on."""
        self._inner_paused = paused
        self._apply_reading()

    def _apply_reading(self) -> None:
        paused = self._inner_paused or self._backlog is not None
        if paused is self._read_paused or self.transport.is_closing():
            return
        self._read_paused = paused
        if paused:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def _take(self, data: bytes) -> None:
        if self.overflowed:
            return  # the connection closes after the requests it has: the rest is never parsed
        if not self._awaiting:
            self.inner.data_received(data)
            return
        head = data
        if not self._head_bytes:
            # Blank lines before a request are skipped by the parser: they are not its head, and must not
            # pass for the end of one.
            head = data.lstrip(b"\r\n")
        most = self.limits.limits.max_head_bytes
        ends = (self._head_suffix + head[: most - self._head_bytes]).find(_HEAD_END) >= 0
        self._head_bytes += len(head)
        if not ends and self._head_bytes > most:
            # The head does not end within the limit: what came of it is never parsed.
            self._refuse(HEAD_TOO_LARGE, too_large_answer(most))
            return
        self._head_suffix = head[-3:]
        early = self._early
        if early is None:
            self.inner.data_received(data)
        else:
            # No HTTP protocol yet: the first head is gathered here, and the protocol made once it ends.
            # A connection that never sends a whole head costs no more than this.
            if head:
                early.append(head)  # blank lines before it dropped: any number of them costs nothing
            if not ends:
                return
            self._early = None
            self._start(early[0] if len(early) == 1 else b"".join(early))
        if self._awaiting and self._head_bytes > most and not self.transport.is_closing():
            # The parser did not end the head where this gate saw its end (it never should).
            self._refuse(HEAD_TOO_LARGE, too_large_answer(most))

    def eof_received(self) -> bool | None:
        return None if self._early is not None else self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        address = self.address
        if address is None:
            return
        self.address = None
        self._disarm()
        self._unwatch_sending()
        self._backlog = None
        self.limits.release(address)
        if self._early is not None:
            self._built[1].connections.discard(self)
            return
        inner = self.inner
        # The gate, its protocol and the transport's view refer to one another: undone here, they are
        # freed as soon as they close rather than left for the garbage collector to find.
        self.inner = cast(asyncio.Protocol, None)
        for name in _HANDED:
            vars(self).pop(name, None)
        inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._watch_sending()
        if self._early is None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        self._unwatch_sending()  # the client took what was over the high-water mark
        if self._early is None:
            self.inner.resume_writing()

    # What the HTTP protocol says of its requests.

    def head_complete(self, body_length: int) -> bool:
        """A head has come whole, announcing a body of `body_length` bytes (0: none, or chunked); False
        if the parser went past the requests a connection may have at once: the request is dropped and
        the connection closes after the answers before it."""
        if self._unanswered >= MOST_REQUESTS:
            self.overflowed = True
            self._awaiting = False
            return False
        self._awaiting = False
        self._body_left = body_length
        self._unanswered += 1
        return True

    def request_complete(self) -> None:
        self._body_left = 0
        self._disarm()
        self._awaiting, self._head_bytes, self._head_suffix = True, 0, b""
        if not self._unanswered:
            self._arm()  # answered already (refused before its body came): the next request is due

    def response_complete(self) -> None:
        self._unanswered -= 1
        self._answered = True
        if not self._unanswered and self._awaiting and self._timer is None:
            self._arm()
        if not self._unanswered and self._backlog is not None:
            # Not from within uvicorn's response: the next request starts on its own turn of the loop.
            self._loop.call_soon(self._release)

    def hand_over(self, protocol: asyncio.Protocol, view: _TransportView) -> None:
        """The connection now speaks `protocol` (a websocket): the gate stays the transport's protocol,
        to hear the close, and the transport calls the new protocol's own methods for all the rest."""
        self._disarm()
        self._unwatch_sending()
        self._awaiting = False
        self._handed = True
        self.inner = protocol
        # Instance attributes shadow this class's methods, and the transport looks the protocol's
        # data_received up again when it is set: data goes to the websocket protocol with no call between.
        vars(self).update({name: getattr(protocol, name) for name in _HANDED})
        self.transport.set_protocol(self)
        # And the protocol writes to the transport itself: the view was needed for the upgrade alone.
        if getattr(protocol, "transport", None) is view:
            protocol.transport = self.transport  # type: ignore[attr-defined]

    # Deadlines and refusals.

    def _arm(self) -> None:
        if not self.transport.is_closing():
            self._timer = self._loop.call_later(self.limits.limits.request_timeout, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.address is None or self.transport.is_closing():
            return
        if self._awaiting and not self._head_bytes and self._answered:
            self.close()  # idle between requests: keep-alive's end, not a refusal
            return
        self._refuse(HEAD_TIMEOUT if self._awaiting else BODY_TIMEOUT)

    def _refuse(self, reason: str, answer: bytes = b"") -> None:
        self._disarm()
        self._awaiting = False
        if self.address is not None:
            self.limits.refuse(reason, self.address)
        if answer:
            self.transport.write(answer)
        self.close()

    def close(self) -> None:
        """Close the connection: at once when all is sent, else once it is (within the send deadline)."""
        self.transport.close()
        if self.address is not None and self.transport.get_write_buffer_size():
            self._watch_sending()

    # The send deadline.

    def _watch_sending(self) -> None:
        if self._send_timer is None and self.address is not None:
            self._unsent = self.transport.get_write_buffer_size()
            self._send_timer = self._loop.call_later(self.limits.limits.send_timeout, self._check_sending)

    def _unwatch_sending(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _check_sending(self) -> None:
        self._send_timer = None
        if self.address is None:
            return
        unsent = self.transport.get_write_buffer_size()
        if unsent and self._unsent - unsent < min(SEND_PROGRESS_BYTES, self._unsent):
            self._disarm()
            self._unwatch_sending()
            self.limits.refuse(SEND_TIMEOUT, self.address)
            self.transport.abort()
        elif unsent:
            self._watch_sending()


def gated_http(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """The protocol class for `uvicorn.Config(http=...)` that applies `limits` to every connection."""
    return type("GatedHttpProtocol", (GatedHttpProtocol,), {"limits": limits})
