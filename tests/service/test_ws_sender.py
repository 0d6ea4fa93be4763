"""The outbox's sender hands each frame to the ASGI server's `send` as one websocket.send message."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from server.web.ws import _text_sender


async def test_a_coroutine_send_is_handed_over_as_it_is() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    sending = _text_sender(send)(b'{"type":"events"}')
    assert inspect.iscoroutine(sending)
    await sending
    assert sent == [{"type": "websocket.send", "text": '{"type":"events"}'}]


async def test_a_send_returning_another_awaitable_is_wrapped_in_a_coroutine() -> None:
    sent: list[dict[str, Any]] = []
    done = asyncio.get_running_loop().create_future()

    def send(message: dict[str, Any]) -> asyncio.Future[None]:
        sent.append(message)
        return done

    sending = _text_sender(send)("é".encode())
    assert inspect.iscoroutine(sending)
    done.set_result(None)
    await sending
    assert sent == [{"type": "websocket.send", "text": "é"}]
