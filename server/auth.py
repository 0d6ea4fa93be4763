"""Seat and watch tokens: random, shown once, stored only as hashes, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

WATCH = "watch"


def new_token() -> str:
    """A fresh secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def new_game_id() -> str:
    """A fresh game id: short, URL-safe, unguessable enough that ids need not be secret."""
    return secrets.token_urlsafe(9).replace("-", "x").replace("_", "y")


def digest(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def seat_key(seat: int) -> str:
    """The credentials field of a seat."""
    return f"seat:{seat}"


def identify(token: str, credentials: dict[str, str]) -> str | None:
    """The credentials field (`seat:N` or `watch`) whose hash matches `token`, or None.

    Every stored hash is compared, in constant time, whatever matches, so timing tells nothing.
    """
    presented = digest(token)
    found: str | None = None
    for field, stored in credentials.items():
        if hmac.compare_digest(presented, stored):
            found = field
    return found
