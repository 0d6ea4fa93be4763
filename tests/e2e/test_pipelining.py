"""`python -m bench pipelining`, small: never-reading clients each pipelining thousands of requests leave
the real server's memory bounded and /metrics answered within a second, are cut at the send deadline,
and hold nothing once gone."""

from __future__ import annotations

from typing import Any

import pytest

from bench.pipelining import GOAL_RSS_MIB, GOAL_WAIT_SECONDS, measure
from tests.support.e2e import assert_clean_logs

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

CONNECTIONS = 50
REQUESTS = 2000
SEND_TIMEOUT = 1.0


def test_pipelined_requests_never_read_leave_memory_bounded_and_metrics_answered(start_server: Any) -> None:
    server = start_server(send_timeout=SEND_TIMEOUT, max_connections_per_address=1000)
    result = measure(server.url, server.pid, CONNECTIONS, REQUESTS, seconds=SEND_TIMEOUT + 7)
    assert result["metrics_failures"] == {} and result["metrics_probes"] > 20
    assert result["metrics_wait_ms"]["max"] < GOAL_WAIT_SECONDS * 1000, result["metrics_wait_ms"]
    assert result["rss_mib"]["max"] < GOAL_RSS_MIB, result["rss_mib"]
    # Every attacking connection was cut by the node while the attacker still held it.
    assert result["node_refused"]["send_timeout"] == CONNECTIONS
    assert result["node_connections"][-1][1] == 1  # the probe's own
    assert result["node_connections_after"] == 1
    assert_clean_logs(server.logs())
