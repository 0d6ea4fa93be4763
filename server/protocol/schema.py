"""The published message schemas (GET /schema.json), generated from the msgspec types themselves."""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from domain import Command, Event
from projections import View
from server.engine.envelope import Envelope
from server.protocol.frames import ClientFrame, ServerFrame


@functools.cache
def document() -> bytes:
    """One JSON Schema document with a definition per type clients exchange with the server."""
    types: tuple[Any, ...] = (ClientFrame, ServerFrame, Envelope, Event, View, Command)
    roots, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    return msgspec.json.encode(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Orchestra wire protocol v1",
            "$defs": components,
            "properties": {
                "client_frame": roots[0],
                "server_frame": roots[1],
                "envelope": roots[2],
                "event": roots[3],
                "view": roots[4],
                "domain_command": roots[5],
            },
        }
    )
