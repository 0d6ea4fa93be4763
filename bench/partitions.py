"""Network partitions between server nodes and Redis, all on this machine (`python -m bench faults
--partitions`; needs root, `ip` and `nft`).

Each server node runs in a network namespace of its own, joined to this machine by a veth pair; Redis
listens on an address of this machine's loopback (HOST, besides 127.0.0.1), which every node, in a
namespace or not, reaches Redis by. A partition is an nftables table in the node's namespace that drops
its packets to and from the Redis ports: the node's connections to Redis go silent (no reset, as a cut
cable), while its clients, who reach it through its veth, still get answers. Healing deletes the table.

Everything is named after this process (`orf<pid>...`), torn down by `close()`, and a run that died
before tearing down is cleaned up by the next (`sweep()`: the namespaces of processes gone).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable

# On the loopback, so that it is there before any veth is, for Redis to bind to.
HOST = "10.242.255.1"
PREFIX = "orf"
TABLE = "orchestra_partition"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


def supported() -> str | None:
    """None when this machine lets us make a namespace with a veth pair and an nftables table in it; else
    why not, in words."""
    name = f"{PREFIX}{os.getpid()}probe"
    try:
        _ip("netns", "add", name)
    except FileNotFoundError:
        return "no `ip` command"
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` refused: {exc.stderr.strip()}"
    try:
        nft = subprocess.run(
            ["ip", "netns", "exec", name, "nft", "add", "table", "inet", TABLE],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        if nft.returncode != 0:
            return f"nftables refused in a namespace: {nft.stderr.strip() or 'no nft command'}"
    finally:
        _ip("netns", "del", name, check=False)
    return None


def sweep() -> None:
    """Delete the namespaces, and the loopback address, left by runs whose process is gone."""
    listed = _ip("netns", "list", check=False).stdout
    left = False
    for name in re.findall(rf"^({PREFIX}(\d+)n\d+)", listed, flags=re.MULTILINE):
        if os.path.exists(f"/proc/{name[1]}"):
            left = True
        else:
            _ip("netns", "del", name[0], check=False)
    if not left:
        _ip("addr", "del", f"{HOST}/32", "dev", "lo", check=False)


class Namespaces:
    """`count` namespaces, node i's at address(i), each with a default route to this machine."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.names = [f"{PREFIX}{os.getpid()}n{i}" for i in range(count)]
        self._cut: set[int] = set()

    def open(self) -> Namespaces:
        sweep()
        try:
            if HOST not in _ip("-4", "addr", "show", "dev", "lo").stdout:
                _ip("addr", "add", f"{HOST}/32", "dev", "lo")
            for index, name in enumerate(self.names):
                outside, inside = f"{PREFIX}{os.getpid()}h{index}", f"{PREFIX}{os.getpid()}v{index}"
                _ip("netns", "add", name)
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns", name)
                _ip("addr", "add", f"10.242.{index}.1/30", "dev", outside)
                _ip("link", "set", outside, "up")
                _ip("-n", name, "addr", "add", f"{self.address(index)}/30", "dev", inside)
                _ip("-n", name, "link", "set", inside, "up")
                _ip("-n", name, "link", "set", "lo", "up")
                _ip("-n", name, "route", "add", "default", "via", f"10.242.{index}.1")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Delete every namespace (its veth pair goes with it) and the loopback address."""
        for name in self.names:
            _ip("netns", "del", name, check=False)
        self._cut.clear()
        sweep()

    def __enter__(self) -> Namespaces:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def address(self, index: int) -> str:
        """Node `index`'s address, in its namespace."""
        return f"10.242.{index}.2"

    def wrapper(self, index: int) -> list[str]:
        """What goes before node `index`'s command to run it in its namespace."""
        return ["ip", "netns", "exec", self.names[index]]

    def cut(self, index: int, ports: Iterable[int]) -> None:
        """Drop node `index`'s packets to and from HOST's `ports` (Redis and the Sentinels)."""
        listed = ", ".join(str(port) for port in sorted(set(ports)))
        out = f"ip daddr {HOST} tcp dport {{ {listed} }} drop"
        into = f"ip saddr {HOST} tcp sport {{ {listed} }} drop"
        rules = (
            f"table inet {TABLE} {{\n"
            f"  chain out {{ type filter hook output priority 0; {out}; }}\n"
            f"  chain in {{ type filter hook input priority 0; {into}; }}\n"
            "}\n"
        )
        subprocess.run(
            ["ip", "netns", "exec", self.names[index], "nft", "-f", "-"],
            input=rules,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
        self._cut.add(index)

    def heal(self, index: int) -> None:
        """Node `index` reaches Redis again."""
        subprocess.run(
            ["ip", "netns", "exec", self.names[index], "nft", "delete", "table", "inet", TABLE],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
        self._cut.discard(index)
