"""server.connections: the counts by address, the descriptor budget, and the summary line of refusals."""

from __future__ import annotations

import asyncio
import logging
import resource

import pytest

from server import connections
from server.config import Settings
from server.connections import ConnectionLimits, Limits, address_key, fitted
from tests.support.waiting import until


def limits(max_connections: int = 3, max_per_address: int = 2) -> ConnectionLimits:
    return ConnectionLimits(
        Limits(max_connections, max_per_address, max_head_bytes=1024, request_timeout=1.0),
        summary_seconds=0.3,
    )


@pytest.mark.parametrize(
    ("peername", "key"),
    [
        (("203.0.113.7", 4321), "203.0.113.7"),
        (("::ffff:203.0.113.7", 4321, 0, 0), "203.0.113.7"),
        (("2001:db8:1:2:3:4:5:6", 4321, 0, 0), "2001:db8:1::/56"),
        (("2001:db8:1:ff:ffff::1", 4321, 0, 0), "2001:db8:1::/56"),  # another /64 of the same /56
        (("2001:db8:1:100::1", 4321, 0, 0), "2001:db8:1:100::/56"),
        (("fe80::1%eth0", 4321, 0, 2), "fe80::/56"),
        (None, "local"),
        ("/run/orchestra.sock", "local"),
    ],
)
def test_a_connection_counts_against_its_ipv4_address_or_its_ipv6_56(peername: object, key: str) -> None:
    assert address_key(peername) == key


def test_the_global_limit_leaves_descriptors_for_everything_else() -> None:
    assert fitted(20_000, 1 << 20) == 20_000
    assert fitted(20_000, 20_000) == 20_000 - 1024
    assert fitted(20_000, 1024) == 768  # a quarter kept when the limit is small
    assert fitted(10, 2) == 2 and fitted(10, 1) == 1


def test_the_descriptor_limit_is_raised_to_the_hard_limit() -> None:
    soft = connections.raise_descriptor_limit()
    now, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == now
    if hard != resource.RLIM_INFINITY:
        assert now == hard


def test_a_global_limit_over_the_descriptors_is_lowered_and_said(caplog: pytest.LogCaptureFixture) -> None:
    descriptors = connections.raise_descriptor_limit()
    with caplog.at_level(logging.WARNING, logger="server.connections"):
        counts = connections.from_settings(Settings(max_connections=descriptors + 1))
    assert counts.limits.max_connections == fitted(descriptors + 1, descriptors) < descriptors
    assert f"descriptor limit of {descriptors}" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="server.connections"):
        counts = connections.from_settings(Settings(max_connections=10, max_connections_per_address=0))
    assert counts.limits.max_connections == 10 and counts.limits.max_per_address == 0
    assert caplog.text == ""


def test_connections_are_counted_by_address_and_released() -> None:
    counts = limits()
    assert counts.admit("a") is None and counts.admit("a") is None
    assert counts.admit("a") == "per_address"
    assert counts.admit("b") is None
    assert counts.admit("c") == "global"
    assert counts.open == 3 and counts.by_address == {"a": 2, "b": 1}
    counts.release("a")
    counts.release("b")
    assert counts.by_address == {"a": 1} and counts.open == 1
    assert counts.admit("c") is None
    unlimited = limits(max_per_address=0)
    assert [unlimited.admit("a") for _ in range(4)] == [None, None, None, "global"]
    assert unlimited.by_address == {}


@pytest.mark.logs_warnings  # refusals are logged at warning
async def test_refusals_are_logged_at_once_then_summed_up_at_most_once_per_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counts = limits()
    with caplog.at_level(logging.INFO, logger="server.connections"):
        counts.refuse("per_address", "203.0.113.7")
        assert len(caplog.records) == 1  # the first of a quiet window: at once
        first = caplog.records[0]
        assert first.levelno == logging.WARNING and first.refused == {"per_address": 1}  # type: ignore[attr-defined]
        for _ in range(40):
            counts.refuse("per_address", "203.0.113.7")
        counts.refuse("global", "198.51.100.1")
        counts.refuse("head_timeout", "198.51.100.1")
        assert len(caplog.records) == 1  # the rest wait for the window's end
        await until(lambda: len(caplog.records) >= 2, 2, "the window's summary")
        assert len(caplog.records) == 2
        summary = caplog.records[1]
        assert summary.refused == {"per_address": 40, "global": 1, "head_timeout": 1}  # type: ignore[attr-defined]
        assert summary.peers == {"203.0.113.7": 40, "198.51.100.1": 2}  # type: ignore[attr-defined]
        assert "per_address 40" in summary.getMessage() and "in the last" in summary.getMessage()
        # Timeouts alone are a line at info; with nothing new, no line at all.
        await asyncio.sleep(0.4)  # a window passes, whose end is the subject
        counts.refuse("head_timeout", "198.51.100.1")
        assert len(caplog.records) == 3 and caplog.records[2].levelno == logging.INFO
        counts.summarize()
        assert len(caplog.records) == 3
    assert counts.refused == {
        "global": 1,
        "per_address": 41,
        "head_too_large": 0,
        "head_timeout": 2,
        "body_timeout": 0,
        "send_timeout": 0,
    }


async def test_a_summary_pending_at_shutdown_is_written_by_summarize(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counts = limits()
    with caplog.at_level(logging.INFO, logger="server.connections"):
        counts.refuse("head_too_large", "a")
        counts.refuse("head_too_large", "a")
        counts.summarize()
        lines = [r.refused for r in caplog.records]  # type: ignore[attr-defined]
        assert lines == [{"head_too_large": 1}, {"head_too_large": 1}]
        await asyncio.sleep(0.4)  # the timer it cancelled writes nothing more
        assert len(caplog.records) == 2
