"""Waiting on the event itself, never on a guessed length of time: a condition polled against a deadline.

`until(condition)` returns the condition's first truthy value; `eventually(check)` retries an assertion
until it passes; `until_sync` and `eventually_sync` do the same for tests that block (child processes,
sockets). Each raises AssertionError at its deadline, saying what never came, so a bug fails fast and
plainly instead of hanging the run or passing by luck of timing.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

# Short enough that a test waits little past its event, long enough not to starve the server under test
# of the one core it may share with the test.
INTERVAL = 0.01


@overload
async def until(
    condition: Callable[[], Awaitable[T]], timeout: float = ..., what: str = ..., *, interval: float = ...
) -> T: ...
@overload
async def until(
    condition: Callable[[], T], timeout: float = ..., what: str = ..., *, interval: float = ...
) -> T: ...
async def until(
    condition: Callable[[], object],
    timeout: float = 5.0,
    what: str = "the condition",
    *,
    interval: float = INTERVAL,
) -> object:
    """Poll `condition` (plain or async) every `interval` seconds until it returns a truthy value; that
    value. A condition that acts (sends a command, starts a process) may ask for a longer interval.

    Raises: AssertionError naming `what` when it is still falsy after `timeout` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s (last: {value!r})")
        await asyncio.sleep(interval)


async def eventually(check: Callable[[], object], timeout: float = 5.0) -> None:
    """Retry `check` (plain or async; it asserts) until it passes; its last AssertionError at the deadline."""
    failure: list[AssertionError] = []

    async def passes() -> bool:
        try:
            result = check()
            if inspect.isawaitable(result):
                await result
        except AssertionError as exc:
            failure[:] = [exc]
            return False
        return True

    try:
        await until(passes, timeout)
    except AssertionError:
        raise failure[-1] from None


def until_sync(
    condition: Callable[[], T],
    timeout: float = 5.0,
    what: str = "the condition",
    *,
    interval: float = INTERVAL,
) -> T:
    """`until` for a test that blocks: poll `condition` until truthy; that value. Raises: AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s (last: {value!r})")
        time.sleep(interval)


def eventually_sync(check: Callable[[], object], timeout: float = 5.0) -> None:
    """`eventually` for a test that blocks: retry the assertion `check` until it passes."""
    failure: list[AssertionError] = []

    def passes() -> bool:
        try:
            check()
        except AssertionError as exc:
            failure[:] = [exc]
            return False
        return True

    try:
        until_sync(passes, timeout)
    except AssertionError:
        raise failure[-1] from None
