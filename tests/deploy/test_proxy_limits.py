"""deploy/nginx.conf holds a client to what a node's connection gate does (docs/operations.md, Without the
connection gate): the same deadlines and head size as the server's defaults, per-client connections, a
bounded body and bounded requests a connection.
"""

from __future__ import annotations

from server.config import Settings
from tests.deploy.test_deploy import nginx_directives


def seconds(value: str) -> float:
    assert value.endswith("s"), value
    return float(value[:-1])


def kib(value: str) -> int:
    assert value.endswith("k"), value
    return int(value[:-1]) * 1024


def test_the_proxy_bounds_what_the_gate_bounds_with_the_servers_defaults() -> None:
    found = {d[0]: d[1:] for d in nginx_directives()}
    defaults = Settings()
    assert seconds(found["client_header_timeout"][0]) == defaults.request_timeout
    assert seconds(found["client_body_timeout"][0]) == defaults.request_timeout
    assert seconds(found["send_timeout"][0]) == defaults.send_timeout
    assert seconds(found["keepalive_timeout"][0]) == defaults.request_timeout
    count, size = found["large_client_header_buffers"]
    assert kib(size) == defaults.max_head_bytes and int(count) >= 1
    assert 0 < int(found["keepalive_requests"][0]) <= 1000
    assert kib(found["client_max_body_size"][0]) >= defaults.max_body_bytes
    zone, most = found["limit_conn"]
    assert zone == "per_client" and 0 < int(most) <= defaults.max_connections_per_address
