"""The clean-log check each test ends with (tests/conftest.py): what a server it ran logged at warning or
above, in process (log records) or in a child process (its JSON log file), fails that test.

A test that means to provoke such a line (a fault, a refusal logged on purpose) says so with
`@pytest.mark.logs_warnings`, and asserts on the lines it expects itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

MARKER = "logs_warnings"
# The loggers of the server and of what it runs (uvicorn, websockets): a test's own library noise, say
# asyncio's word on a task collected after its test ended, belongs to no test in particular.
WATCHED = ("server", "orchestra_client", "bench", "uvicorn", "websockets")


def _watched(name: str) -> bool:
    return any(name == root or name.startswith(root + ".") for root in WATCHED)


def warning_records(records: Iterable[logging.LogRecord]) -> list[str]:
    """The records at warning or above of a watched logger, each as `level logger: message`."""
    return [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in records
        if r.levelno >= logging.WARNING and _watched(r.name)
    ]


def warning_lines(log: str) -> list[str]:
    """The lines of a server's JSON log at warning or above, and any line of a traceback written raw."""
    found = []
    for text in log.splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            if "Traceback" in text:
                found.append(text)
            continue
        if isinstance(line, dict) and line.get("level") in ("warning", "error", "critical"):
            found.append(text)
    return found


def logged(log: str, message: str, **fields: object) -> list[dict[str, object]]:
    """The lines of a server's JSON log at warning or above with this message and these fields."""
    found = []
    for text in log.splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if (
            isinstance(line, dict)
            and line.get("level") in ("warning", "error", "critical")
            and line.get("msg") == message
            and all(line.get(key) == value for key, value in fields.items())
        ):
            found.append(line)
    return found
