"""The async shell: HTTP and websocket transport, the event store, the command service, the live hub."""
