"""Merkle trees of signed lines, checked against a deliberately plain oracle: the root recomputed by
recursion over the leaves, and every path folded by hand."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from server.engine import merkle


def _oracle_root(hashes: list[bytes]) -> bytes:
    """Pair neighbours left to right; an odd last one goes up alone; until one is left."""
    if len(hashes) == 1:
        return hashes[0]
    upper = [
        hashlib.sha256(b"\x01" + hashes[i] + hashes[i + 1]).digest() for i in range(0, len(hashes) - 1, 2)
    ]
    if len(hashes) % 2:
        upper.append(hashes[-1])
    return _oracle_root(upper)


def _fold_by_hand(leaf: bytes, path: bytes) -> bytes:
    current = leaf
    for start in range(0, len(path), 33):
        side, sibling = path[start], path[start + 1 : start + 33]
        pair = sibling + current if side == 0 else current + sibling
        current = hashlib.sha256(b"\x01" + pair).digest()
    return current


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=70))
def test_every_leaf_and_its_path_lead_to_the_root_that_the_oracle_computes(lines: list[bytes]) -> None:
    leaves = [merkle.leaf(b"ctx\n", line) for line in lines]
    assert leaves == [hashlib.sha256(b"\x00ctx\n" + line).digest() for line in lines]
    root, paths = merkle.tree(leaves)
    assert root == _oracle_root(leaves)
    for leaf, path in zip(leaves, paths, strict=True):
        assert (merkle.root(leaf, path) == root) == (len(leaves) > 1)  # a batch of one has no path
        if len(leaves) > 1:
            assert _fold_by_hand(leaf, path) == root
            assert len(path) // 33 <= (len(leaves) - 1).bit_length()


@given(st.lists(st.binary(max_size=20), min_size=2, max_size=40, unique=True), st.data())
def test_a_changed_line_or_a_borrowed_path_does_not_reach_the_root(
    lines: list[bytes], data: st.DataObject
) -> None:
    leaves = [merkle.leaf(b"ctx\n", line) for line in lines]
    root, paths = merkle.tree(leaves)
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(0, len(lines) - 1).filter(lambda k: k != i))
    assert merkle.root(merkle.leaf(b"ctx\n", lines[i] + b"x"), paths[i]) != root
    assert merkle.root(merkle.leaf(b"other\n", lines[i]), paths[i]) != root
    assert merkle.root(leaves[i], paths[j]) != root


def test_malformed_paths_are_refused() -> None:
    leaf = merkle.leaf(b"ctx\n", b"line")
    assert merkle.root(leaf, b"") is None
    assert merkle.root(leaf, b"\x00" + b"x" * 31) is None  # not whole steps
    assert merkle.root(leaf, b"\x02" + b"x" * 32) is None  # no such side
    assert merkle.root(leaf, (b"\x00" + b"x" * 32) * 33) is None  # longer than any batch could make
