"""The HTTP and websocket routes, the pages, and the app that wires them (`create_app`)."""
