"""Structured logs: one JSON object per line, never a token."""

from __future__ import annotations

import logging
import sys
from typing import Any

import msgspec

from server.clock import utc_text

_encode = msgspec.json.Encoder().encode
# Fields the server may attach to a record with `extra=`; anything else is ignored, so a token passed by
# mistake in an unknown field still never reaches the output.
FIELDS = (
    "game_id",
    "seat",
    "command_id",
    "version",
    "code",
    "role",
    "peer",
    "duration_ms",
    "url",
    "error",
    "count",
    "status",
    "path",
)


class JsonFormatter(logging.Formatter):
    """Formats a record as a single JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": utc_text(int(record.created) * 1000 + int(record.msecs)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        try:
            return _encode(line).decode()
        except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
            # A value that cannot be encoded (a lone surrogate, an odd object) must not lose the line.
            return _encode({k: repr(v) for k, v in line.items()}).decode()


def setup(level: str = "info", stream: Any = None) -> None:
    """Send the server's and uvicorn's logs to `stream` (stderr) as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    # A line holds none of the caller's thread or process: logging's documented switches stop it
    # collecting them for every record.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # At debug, uvicorn and websockets log every frame's text, a hello's token with it: theirs stay at
    # info whatever the server's level, so that no level writes a token.
    for name in ("uvicorn", "websockets"):
        logging.getLogger(name).setLevel(max(logging.INFO, root.level))
    # uvicorn's access log for websockets carries the path only; keep it, it never holds a token.
