"""The batch trees against RFC 6962's definitions, written out as the RFC states them (the oracle)."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from server.protocol import merkle


def _mth(data: list[bytes]) -> bytes:
    """RFC 6962 section 2.1: MTH(D[n]) over the leaves' data."""
    if len(data) == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = 1
    while k * 2 < len(data):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(data[:k]) + _mth(data[k:])).digest()


def _path(m: int, data: list[bytes]) -> list[bytes]:
    """RFC 6962 section 2.1.1: PATH(m, D[n])."""
    if len(data) == 1:
        return []
    k = 1
    while k * 2 < len(data):
        k *= 2
    if m < k:
        return _path(m, data[:k]) + [_mth(data[k:])]
    return _path(m - k, data[k:]) + [_mth(data[:k])]


def _leaves(n: int) -> list[bytes]:
    return [f'{{"version":{i}}}'.encode() for i in range(n)]


def test_every_root_and_path_of_trees_up_to_70_leaves_is_the_rfcs() -> None:
    for n in range(1, 71):
        data = _leaves(n)
        root, paths = merkle.tree([merkle.leaf_hash(d) for d in data])
        assert root == _mth(data)
        for m in range(n):
            assert paths[m] == _path(m, data)
            assert merkle.root_from_path(merkle.leaf_hash(data[m]), m, n, paths[m]) == root


def test_a_path_leads_to_the_root_only_from_its_own_leaf_and_with_its_length() -> None:
    # The index and size need not be bound by the path: the size is in the signed checkpoint, and an
    # index is where the leaf stands, which the path alone proves to be in the tree.
    for n in range(1, 34):
        data = _leaves(n)
        root, paths = merkle.tree([merkle.leaf_hash(d) for d in data])
        for m in range(n):
            leaf = merkle.leaf_hash(data[m])
            assert merkle.root_from_path(merkle.leaf_hash(b"other"), m, n, paths[m]) != root
            assert merkle.root_from_path(leaf, n, n, paths[m]) is None
            assert merkle.root_from_path(leaf, -1, n, paths[m]) is None
            assert merkle.root_from_path(leaf, m, n, [*paths[m], root]) is None  # one hash too many
            if paths[m]:
                assert merkle.root_from_path(leaf, m, n, paths[m][:-1]) != root  # one too few


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=200), st.data())
def test_a_changed_hash_anywhere_in_a_path_changes_the_root(data: list[bytes], draw: st.DataObject) -> None:
    root, paths = merkle.tree([merkle.leaf_hash(d) for d in data])
    assert root == _mth(data)
    m = draw.draw(st.integers(0, len(data) - 1))
    path = paths[m]
    if not path:
        return
    at = draw.draw(st.integers(0, len(path) - 1))
    bit = draw.draw(st.integers(0, 255))
    changed = [*path]
    changed[at] = bytes(b ^ (1 << (bit % 8)) if i == bit // 8 else b for i, b in enumerate(path[at]))
    assert merkle.root_from_path(merkle.leaf_hash(data[m]), m, len(data), changed) != root
