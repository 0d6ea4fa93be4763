"""The minimal pipeline's `--sign`: its envelopes signed as ours are, so that a baseline that signs
costs the same signature ours does."""

from __future__ import annotations

import argparse
import shutil

import httpx
import msgspec
import pytest
from redis import Redis

from bench import load, minimal
from bench.common import RedisServer, ServerProcess
from server.engine.signing import ENVELOPE, Keyring, Signer
from server.store.redis.keys import events_key
from tests.support.redis import stream_entries

EVENT = minimal.Event("ChairClaimed", 1, "violin", msgspec.Raw(b'{"kind":"instrument"}'))


def test_a_signing_minimal_pipeline_writes_lines_that_verify_with_its_key() -> None:
    signer = Signer.generate()
    state = minimal.State("redis://127.0.0.1:9", views=False, signer=signer)  # never connects here
    line = state.line("m-1", 2, "c-1", 1, EVENT)

    body, problem = Keyring.of(signer).check(ENVELOPE, line, signer.key_id)
    assert problem is None and body is not None
    stored = msgspec.json.decode(line)
    assert stored["key"] == signer.key_id and isinstance(stored["sig"], str)
    fields = ("game_id", "version", "command_id", "seat")
    assert [stored[name] for name in fields] == ["m-1", 2, "c-1", 1]
    assert stored["event"] == msgspec.json.decode(msgspec.json.encode(EVENT))
    # Another key's keyring finds the signature bad: the line is signed, not merely marked.
    other = Signer.generate()
    assert Keyring([other.public]).check(ENVELOPE, line, signer.key_id)[1] is not None


def test_without_a_signer_the_minimal_pipeline_stores_plain_envelopes() -> None:
    state = minimal.State("redis://127.0.0.1:9", views=False, signer=None)
    stored = msgspec.json.decode(state.line("m-1", 2, "c-1", 1, EVENT))
    assert "sig" not in stored and "key" not in stored
    assert stored["version"] == 2


def test_a_padded_line_is_as_long_as_a_signed_one_and_carries_no_signature() -> None:
    signer = Signer.generate()
    signed = minimal.State("redis://127.0.0.1:9", views=False, signer=signer).line("m-1", 2, "c-1", 1, EVENT)
    padded = minimal.State("redis://127.0.0.1:9", views=False, signer=None, pad=True).line(
        "m-1", 2, "c-1", 1, EVENT
    )
    # The same fields and the same time format: only the time's digits may differ in length.
    assert abs(len(padded) - len(signed)) <= 3
    stored = msgspec.json.decode(padded)
    assert stored["key"] == minimal.PAD_KEY and len(stored["sig"]) == len(msgspec.json.decode(signed)["sig"])
    assert Keyring.of(signer).check(ENVELOPE, padded, signer.key_id)[1] is not None


def test_only_the_minimal_server_signs_and_only_with_the_signing_baseline() -> None:
    parser = argparse.ArgumentParser()
    load.add_arguments(parser)
    signing, plain = parser.parse_args(["--signing-baseline"]), parser.parse_args([])
    assert load.server_args("minimal", signing) == ["--sign"]
    assert load.server_args("ours", signing) == [] and load.server_args("minimal", plain) == []


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs a redis-server binary")
def test_the_minimal_server_started_with_sign_stores_signed_envelopes() -> None:
    with RedisServer() as redis, ServerProcess("minimal", redis.url, args=["--sign"]) as server:
        created = httpx.post(f"{server.url.rstrip('/')}/games", json={"players": ["a", "b"]}, timeout=10)
        assert created.status_code == 201
        game_id = created.json()["game_id"]
        client = Redis.from_url(redis.url)
        try:
            entries = stream_entries(client, events_key(game_id))
        finally:
            client.close()
    assert len(entries) == 1
    stored = msgspec.json.decode(entries[0][1][b"e"])
    assert stored["version"] == 1 and len(stored["key"]) == 16 and isinstance(stored["sig"], str)
