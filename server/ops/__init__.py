"""Running the server: the command line, uvicorn, the embedded Redis, logs, archive, verify, signing keys."""
