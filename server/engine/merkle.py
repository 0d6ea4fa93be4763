"""Merkle trees over signed lines: one signature covers a batch of lines, each line carries its own path.

A leaf is the SHA-256 of 0x00, the signing context and the line's signed bytes; an inner node the SHA-256
of 0x01 and its two children (RFC 6962's prefixes: a leaf can never pass for an inner node). Leaves pair
up level by level, left to right; a level's odd last node moves up unpaired. A line's path lists, from
its leaf up, one step per level where its node has a sibling: a side byte (0x00 when the sibling is on
the left, 0x01 when on the right) and the sibling's 32-byte hash. Folding a leaf with its path gives the
root, so each line is checked on its own, without the other lines of its batch.
"""

from __future__ import annotations

import hashlib

SIBLING_LEFT = 0
SIBLING_RIGHT = 1
STEP = 33  # a side byte and a SHA-256
# A path longer than this could only come from a batch of more than 2**32 lines: malformed.
MAX_STEPS = 32


def leaf(context: bytes, signed: bytes) -> bytes:
    """The leaf hash of a line's signed bytes under `context`."""
    return hashlib.sha256(b"\x00" + context + signed).digest()


def node(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def tree(leaves: list[bytes]) -> tuple[bytes, list[bytes]]:
    """The root over `leaves` (at least one) and each leaf's path to it."""
    paths = [bytearray() for _ in leaves]
    level = leaves
    under: list[list[int]] = [[index] for index in range(len(leaves))]  # the leaves below each node
    while len(level) > 1:
        upper: list[bytes] = []
        upper_under: list[list[int]] = []
        for index in range(0, len(level) - 1, 2):
            left, right = level[index], level[index + 1]
            for member in under[index]:
                paths[member] += bytes([SIBLING_RIGHT]) + right
            for member in under[index + 1]:
                paths[member] += bytes([SIBLING_LEFT]) + left
            upper.append(node(left, right))
            upper_under.append(under[index] + under[index + 1])
        if len(level) % 2:
            upper.append(level[-1])
            upper_under.append(under[-1])
        level, under = upper, upper_under
    return level[0], [bytes(path) for path in paths]


def root(leaf_hash: bytes, path: bytes) -> bytes | None:
    """The root a leaf and its path lead to; None for a malformed path."""
    if not path or len(path) % STEP or len(path) > STEP * MAX_STEPS:
        return None
    current = leaf_hash
    for start in range(0, len(path), STEP):
        side, sibling = path[start], path[start + 1 : start + STEP]
        if side == SIBLING_RIGHT:
            current = node(current, sibling)
        elif side == SIBLING_LEFT:
            current = node(sibling, current)
        else:
            return None
    return current
