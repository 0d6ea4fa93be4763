"""Logs, never holding a token: one JSON object per line for machines, or a few lines in words for people.

The format follows standard error: JSON lines when it is not a terminal (a pipe, a file, the journal), text
when it is; ORCHESTRA_LOG_FORMAT / --log-format (`json`, `text`) says otherwise. The text shows only
warnings and errors: the info lines (each request, each game) are for machines.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any, Literal

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
    "refused",
    "peers",
    "status",
    "path",
    "method",
    "route",
    "binary",
    "redis_version",
)


# A URL's query string: a client may put anything there, a token included. No line keeps one: it is
# cut from every text a line holds, whoever logged it.
_QUERY = re.compile(r"\?[^\s\"'<>]+")
QUERY_OMITTED = "?[query omitted]"


def without_query(text: str) -> str:
    """`text` with every query string in it (a `?` and what follows up to a space or quote) cut."""
    return _QUERY.sub(QUERY_OMITTED, text) if "?" in text else text


class JsonFormatter(logging.Formatter):
    """Formats a record as a single JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": utc_text(int(record.created) * 1000 + int(record.msecs)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": without_query(record.getMessage()),
        }
        for field in FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = without_query(value) if isinstance(value, str) else value
        if record.exc_info:
            line["exc"] = without_query(self.formatException(record.exc_info))
        try:
            return _encode(line).decode()
        except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
            # A value that cannot be encoded (a lone surrogate, an odd object) must not lose the line.
            return _encode({k: repr(v) for k, v in line.items()}).decode()


class TextFormatter(logging.Formatter):
    """Formats a record as one line in words: its time, level and message, and the fields it names. A
    traceback, as uvicorn logs one in its message or a record carries one, is cut to its last line, which
    says what went wrong."""

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(record.created))
        text = f"{when} {record.levelname.lower()}: {_last_line(record.getMessage())}"
        fields = [
            f"{name}: {getattr(record, name)}" for name in FIELDS if getattr(record, name, None) is not None
        ]
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            said = _last_line(str(error))
            fields.append(f"{type(error).__name__}: {said}" if said else type(error).__name__)
        if fields:
            text += f" ({'; '.join(fields)})"
        # A terminal of any encoding takes it: what cannot be written (a lone surrogate) is replaced.
        return without_query(text).encode("utf-8", "replace").decode("utf-8")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines()]
    return lines[-1] if lines else ""


Format = Literal["auto", "json", "text"]


def chosen_format(log_format: Format, stream: Any) -> Literal["json", "text"]:
    """`log_format`, with "auto" decided by `stream`: text on a terminal, JSON otherwise."""
    if log_format != "auto":
        return log_format
    isatty = getattr(stream, "isatty", None)
    try:
        return "text" if callable(isatty) and isatty() else "json"
    except ValueError:  # a closed stream
        return "json"


# What the websockets library writes through uvicorn's logger for every connection.
_CONNECTION_LINES = frozenset({"connection open", "connection closed"})


class WithoutTargets(logging.Filter):
    """Drops uvicorn's lines that quote a request's target (its access lines, its websocket handshake
    lines): the path of a request may name no route, and its query may hold anything. The access log of
    server.web.access names the route instead. Also drops the "connection open" and "connection closed"
    that the websockets library writes through uvicorn's logger for every connection: they name neither
    game nor peer, and the access log's line per websocket session says when and how long."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a line of uvicorn that quotes a request's target or says a connection opened or
        closed."""
        if record.name == "uvicorn.access":
            return False
        if record.name != "uvicorn.error":
            return True
        text = str(record.msg)  # a message may be any object, even one that cannot be hashed
        return text not in _CONNECTION_LINES and '"WebSocket %s"' not in text


def setup(level: str = "info", stream: Any = None, log_format: Format = "auto") -> Literal["json", "text"]:
    """Send the server's and uvicorn's logs to `stream` (stderr) in `log_format`; returns the format chosen.

    Text holds warnings and errors only, whatever `level`: a person reads a few lines, not the access log.
    """
    stream = stream or sys.stderr
    chosen = chosen_format(log_format, stream)
    handler = logging.StreamHandler(stream)
    if chosen == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
        handler.setLevel(logging.WARNING)
    handler.addFilter(WithoutTargets())
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
    # uvicorn's access log is off (server.ops.runner) and filtered out should it run: see WithoutTargets.
    return chosen
