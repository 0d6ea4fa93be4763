"""`orchestra serve` that dies (exit status 3) right after its first append of commands returns, before it
answers or broadcasts them: a crash between the two, for the fault tests.

Run as `python -m tests.support.crash_after_append serve ...`. The crash is a patch of the Redis store's
`append_many` made by this script alone, before the command line runs: the server has no such code and no
setting reaches it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from server.ops.cli import main
from server.store.port import Append, Appended, StoreError
from server.store.redis import RedisEventStore

EXIT_STATUS = 3

Results = list[Appended | StoreError]
AppendMany = Callable[[RedisEventStore, Sequence[Append]], Coroutine[Any, Any, Results]]


def crashing(append_many: AppendMany) -> AppendMany:
    """`append_many` that ends the process at once (no shutdown, no answer) once the store has written."""

    async def append_then_crash(store: RedisEventStore, batch: Sequence[Append]) -> Results:
        await append_many(store, batch)
        os._exit(EXIT_STATUS)

    return append_then_crash


if __name__ == "__main__":
    RedisEventStore.append_many = crashing(RedisEventStore.append_many)  # type: ignore[method-assign, assignment]
    sys.exit(main())
