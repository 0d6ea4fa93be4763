"""Seat, watch and host tokens: random, shown once, stored only as hashes, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

WATCH = "watch"
# The host's credential: reissues seat tokens, closes seats, starts the next game; watches as a spectator.
HOST = "host"


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


def seat_of_key(field: str) -> int | None:
    """The seat a credentials field names (`seat:N`), or None for `watch` and `host`."""
    kind, _, number = field.partition(":")
    return int(number) if kind == "seat" and number.isdigit() else None


def identify(token: str, credentials: dict[str, str]) -> str | None:
    """The credentials field (`seat:N`, `watch` or `host`) whose hash matches `token`, or None.

    Every stored hash is compared, in constant time, whatever matches, so timing tells nothing.
    """
    presented = digest(token)
    found: str | None = None
    for field, stored in credentials.items():
        if hmac.compare_digest(presented, stored):
            found = field
    return found


# The API key ---------------------------------------------------------------------------------------

MIN_API_KEY = 16
# Words of example and placeholder keys (compared ignoring case and anything but letters and digits): a
# key holding one was copied from an example, never generated.
PLACEHOLDERS = ("changeme", "replaceme", "placeholder", "example", "secret", "password")


def api_key_problem(key: str | None) -> str | None:
    """Why `key` may not be the server's API key, or None when it may (or when no key is set).

    Refused: an empty key or one of whitespace; whitespace at either end (a Bearer header is trimmed, so
    it could never match); fewer than 16 characters or fewer than 5 different ones; a placeholder word.
    """
    if key is None:
        return None
    if not key.strip():
        return "ORCHESTRA_API_KEY is set but empty: unset it to let anyone create games, or set a real key"
    if key != key.strip():
        return "ORCHESTRA_API_KEY begins or ends with whitespace, which a Bearer header cannot carry"
    if len(key) < MIN_API_KEY or len(set(key)) < 5:
        return (
            f"ORCHESTRA_API_KEY is too weak: use at least {MIN_API_KEY} random characters "
            "(for example: openssl rand -hex 24)"
        )
    folded = "".join(char for char in key.casefold() if char.isalnum())
    for word in PLACEHOLDERS:
        if word in folded:
            return f"ORCHESTRA_API_KEY holds the placeholder word {word!r}: replace it with a generated key"
    return None
