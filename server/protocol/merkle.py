"""Merkle trees over a batch of envelopes, hashed as RFC 6962 (Certificate Transparency) hashes them.

A batch's envelopes are the leaves, in the order they were sealed. A leaf's hash is SHA-256 of a zero
byte and the leaf; an inner node's, SHA-256 of a one byte and its two children's hashes; a tree of n > 1
leaves splits at the largest power of two below n. An envelope's inclusion path is the list of sibling
hashes from its leaf up to the root (RFC 6962 section 2.1.1), about log2(n) of them, so one signature
over the root vouches for every leaf of the batch and each leaf is still checked on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

_LEAF = b"\x00"
_NODE = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """The hash of a leaf."""
    return hashlib.sha256(_LEAF + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node over its two children's hashes."""
    return hashlib.sha256(_NODE + left + right).digest()


def tree(leaves: Sequence[bytes]) -> tuple[bytes, list[list[bytes]]]:
    """The root of the tree over the leaf hashes `leaves` (at least one), and each leaf's inclusion path,
    from the leaf's sibling up."""
    if len(leaves) == 1:
        return leaves[0], [[]]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)  # the largest power of two below the size
    left, left_paths = tree(leaves[:split])
    right, right_paths = tree(leaves[split:])
    for path in left_paths:
        path.append(right)
    for path in right_paths:
        path.append(left)
    return node_hash(left, right), left_paths + right_paths


def root_from_path(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes | None:
    """The root a leaf hash and its inclusion path lead to, for the leaf at `index` of a tree of `size`
    leaves (RFC 9162 section 2.1.3.2); None when the path cannot be one of such a leaf (too short, too
    long, or an index out of the tree)."""
    if not 0 <= index < size:
        return None
    node, last = index, size - 1
    hashed = leaf
    for sibling in path:
        if last == 0:
            return None  # more hashes than the tree has levels
        if node & 1 or node == last:
            hashed = node_hash(sibling, hashed)
            if not node & 1:  # the right edge of an unbalanced tree: climb to where a sibling is
                while node and not node & 1:
                    node >>= 1
                    last >>= 1
        else:
            hashed = node_hash(hashed, sibling)
        node >>= 1
        last >>= 1
    return hashed if last == 0 else None
