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

A websocket stays counted until it closes: uvicorn upgrades a connection by handing the transport to
its websocket protocol (`transport.set_protocol`); the HTTP protocol holds a view of the transport whose
`set_protocol` makes the websocket protocol the gate's instead, so the gate still hears the close. Once
upgraded, the transport hands received data straight to the websocket protocol, which writes to the
transport itself: frames cost what they did without the gate.

What this relies on of uvicorn beyond its documented Config: `HttpToolsProtocol` (subclassed here to hear
when a head, a request and a response are complete, through `on_headers_complete` and
`on_message_complete`, httptools's parser callbacks uvicorn implements, and uvicorn's own
`on_response_complete`), its constructor's arguments, that its upgrade goes through
`transport.set_protocol`, that its websocket protocol keeps its transport as `transport` (should it not,
frames go through the view: slower, still right), and that its shutdown closes what is in
`server_state.connections` with `shutdown()` (the gate is there until it has made the HTTP protocol).
`missing()` lists what the installed uvicorn lacks; tests/compat runs the gate in a real uvicorn server.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, ClassVar, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from server.compat import installed
from server.connections import (
    BODY_TIMEOUT,
    HEAD_TIMEOUT,
    HEAD_TOO_LARGE,
    ConnectionLimits,
    address_key,
)

_HOOKS = ("on_headers_complete", "on_message_complete", "on_response_complete")
_CALLED = ("connection_made", "data_received", "eof_received", "connection_lost", "pause_writing")
_CONSTRUCTOR = ("config", "server_state", "app_state", "_loop")
_HEAD_END = b"\r\n\r\n"
# What the transport calls on the websocket protocol itself once a connection is handed over.
_HANDED = ("data_received", "eof_received", "pause_writing", "resume_writing")


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
    """The transport as the HTTP protocol sees it: the transport itself, but for `set_protocol`, which hands
    the connection to the new protocol through the gate."""

    __slots__ = ("_gate", "_transport")

    def __init__(self, transport: asyncio.Transport, gate: GatedHttpProtocol) -> None:
        self._gate = gate
        self._transport = transport

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._gate.hand_over(cast(asyncio.Protocol, protocol), self)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._gate.inner

    # The rest of asyncio.Transport, passed on.

    def write(self, data: Any) -> None:
        self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self._transport.writelines(list_of_data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._transport.close()

    def abort(self) -> None:
        self._transport.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def write_eof(self) -> None:
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)


class _WatchedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol, telling its gate when a head, a request and a response are done."""

    gate: GatedHttpProtocol

    def on_headers_complete(self) -> None:
        self.gate.head_complete()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
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
        self._tail = b""  # the last bytes of the head so far: its end may straddle two reads
        self._unanswered = 0  # requests whose head came and whose response is not complete yet
        self._answered = False

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
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if not self._awaiting:
            self.inner.data_received(data)
            return
        head = data
        if not self._head_bytes:
            # Blank lines before a request are skipped by the parser: they are not its head, and must not
            # pass for the end of one.
            head = data.lstrip(b"\r\n")
        size = self._head_bytes + len(head)
        most = self.limits.limits.max_head_bytes
        early = self._early
        if early is not None:
            # No HTTP protocol yet: the first head is gathered here, and the protocol made once it ends.
            # A connection that never sends a whole head costs no more than this.
            ends = (self._tail + head[: most - self._head_bytes]).find(_HEAD_END) >= 0
            if not ends and size > most:
                self._refuse(HEAD_TOO_LARGE, too_large_answer(most))
                return
            if head:
                early.append(head)  # blank lines before it dropped: any number of them costs nothing
            self._head_bytes = size
            if not ends:
                self._tail = head[-3:]
                return
            self._early = None
            self._start(early[0] if len(early) == 1 else b"".join(early))
            return
        if size > most and (self._tail + head[: most - self._head_bytes]).find(_HEAD_END) < 0:
            # The head does not end within the limit: what came of it is never parsed.
            self._refuse(HEAD_TOO_LARGE, too_large_answer(most))
            return
        self._head_bytes = size
        self._tail = head[-3:]
        self.inner.data_received(data)
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
        if self._early is None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self._early is None:
            self.inner.resume_writing()

    # What the HTTP protocol says of its requests.

    def head_complete(self) -> None:
        self._awaiting = False
        self._unanswered += 1

    def request_complete(self) -> None:
        self._disarm()
        self._awaiting, self._head_bytes, self._tail = True, 0, b""
        if not self._unanswered:
            self._arm()  # answered already (refused before its body came): the next request is due

    def response_complete(self) -> None:
        self._unanswered -= 1
        self._answered = True
        if not self._unanswered and self._awaiting and self._timer is None:
            self._arm()

    def hand_over(self, protocol: asyncio.Protocol, view: _TransportView) -> None:
        """The connection now speaks `protocol` (a websocket): the gate stays the transport's protocol,
        to hear the close, and the transport calls the new protocol's own methods for all the rest."""
        self._disarm()
        self._awaiting = False
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
            self.transport.close()  # idle between requests: keep-alive's end, not a refusal
            return
        self._refuse(HEAD_TIMEOUT if self._awaiting else BODY_TIMEOUT)

    def _refuse(self, reason: str, answer: bytes = b"") -> None:
        self._disarm()
        self._awaiting = False
        if self.address is not None:
            self.limits.refuse(reason, self.address)
        if answer:
            self.transport.write(answer)
        self.transport.close()


def gated_http(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """The protocol class for `uvicorn.Config(http=...)` that applies `limits` to every connection."""
    return type("GatedHttpProtocol", (GatedHttpProtocol,), {"limits": limits})
