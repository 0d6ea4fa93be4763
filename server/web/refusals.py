"""A command the store refused, as the rejection its answer carries: the store's errors in the protocol's
codes (`damaged_game`, `archiving`, `store_full`, `unavailable`). The session words the answer
(`Session.refused`); which code a store error is, is the shell's to say."""

from __future__ import annotations

from domain import Rejected
from server.store import GameFenced, StoreFull, UnreadableGame


class DamagedGame(Rejected):
    """The game's stored history cannot be read: retrying cannot help until an operator restores it."""

    code = "damaged_game"


class Archiving(Rejected):
    """The game is being archived: it takes no more commands."""

    code = "archiving"


class StoreIsFull(Rejected):
    """The store refused the write for want of room: nothing was written."""

    code = "store_full"


class Unavailable(Rejected):
    """The store did not answer: the command may have been written (retry with the same id)."""

    code = "unavailable"


def rejection(error: Exception) -> Rejected:
    """`error` as a rejection: a rule's as it is, a store error as its code; any other failure (the store
    unreachable, a timeout) is `unavailable`."""
    if isinstance(error, Rejected):
        return error
    if isinstance(error, UnreadableGame):
        return DamagedGame(str(error))
    if isinstance(error, GameFenced):
        return Archiving("the game is being archived: it takes no more commands")
    if isinstance(error, StoreFull):
        return StoreIsFull("the event store is full; the command was not written")
    return Unavailable("the event store did not answer; retry with the same id")
