"""The per-address creation throttle counts a client as connections do: an IPv4 address, an IPv6 /56."""

from __future__ import annotations

import pytest

from server.web.throttle import AddressThrottle, client_key


@pytest.mark.parametrize(
    ("host", "key"),
    [
        pytest.param("192.0.2.7", "192.0.2.7", id="ipv4-is-itself"),
        pytest.param("2001:db8:1:ff:abcd::1", "2001:db8:1::/56", id="ipv6-is-its-56"),
        pytest.param("::ffff:192.0.2.7", "192.0.2.7", id="mapped-ipv4-is-ipv4"),
        pytest.param("unknown", "unknown", id="no-address"),
    ],
)
def test_a_client_address_is_keyed_as_connections_key_it(host: str, key: str) -> None:
    assert client_key(host) == key


def test_the_64s_of_one_56_share_one_bucket() -> None:
    now = [0.0]
    throttle = AddressThrottle(per_minute=1, burst=2, clock=lambda: now[0])
    assert throttle.take("2001:db8:1:1::1") == 0
    assert throttle.take("2001:db8:1:2::1") == 0  # another /64, the same customer
    assert throttle.take("2001:db8:1:3::1") > 0
    assert throttle.take("2001:db8:2::1") == 0  # another /56 has its own
