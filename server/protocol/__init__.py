"""The websocket protocol without I/O: frames, their schema, the per-connection limits and session."""
