"""The Redis key layout of the store: a game's keys, the index of games, presence, rate buckets, channels.

Public, for tools, tests and benchmarks that read or write Redis beside the store; the Lua scripts that
change these keys atomically are the adapter's own (`server.store.redis._scripts`).

Every key of one game carries the game id as a hash tag (`{<game_id>}`), so in Redis Cluster all of
them live in one slot and a single script may touch them all:

    orchestra:{<game_id>}:events    stream; entry id 0-<version>; one field `e` = the envelope's bytes
    orchestra:{<game_id>}:auth      hash of the seat and watch credential hashes (secrets stay off events)
    orchestra:{<game_id>}:commands  hash command_key -> "first last" (the outcome a repeat gets back)
    orchestra:games                 sorted set of game ids, scored by creation time (Redis's clock, in us)
    orchestra:{<game_id>}:presence  hash node id -> that node's connections to the game and when it said
                                    so; expires unless written again (no part of the game: never archived)
    orchestra:rate:{<bucket>}       a rate bucket the nodes share (games created per client address): the
                                    time it is full again; expires then

and the index of games beside it, every key of it in the slot of `orchestra:games` (their hash tag is
that key's name), so that one script changes them all together, on a Cluster too:

    {orchestra:games}:public        sorted set of the publicly listed game ids, scored as in orchestra:games
    {orchestra:games}:listing       hash game id -> its listing (what the list shows that never changes)
    {orchestra:games}:live          set of the ids of live games (created, not yet ended nor deleted)
    {orchestra:games}:indexed       set of the ids of indexed games (games written before the index are
                                    not, until indexed: server.engine.listing)

and one pub/sub channel, `orchestra:{<game_id>}:appended` (`...:appended:<db>` on a database other than
0), on which each append on a standalone Redis publishes the game's new version (nodes' tails wait for
it; see `server.store.redis._notify`).
"""

from __future__ import annotations

GAMES_KEY = "orchestra:games"
PUBLIC_KEY = "{orchestra:games}:public"
LISTING_KEY = "{orchestra:games}:listing"
LIVE_KEY = "{orchestra:games}:live"
INDEXED_KEY = "{orchestra:games}:indexed"
INDEX_KEYS = (GAMES_KEY, PUBLIC_KEY, LISTING_KEY, LIVE_KEY, INDEXED_KEY)
FIELD = b"e"


def events_key(game_id: str) -> str:
    """The game's stream of envelopes."""
    return f"orchestra:{{{game_id}}}:events"


def auth_key(game_id: str) -> str:
    """The game's credentials hash, beside its stream."""
    return f"orchestra:{{{game_id}}}:auth"


def acked_key(game_id: str) -> str:
    """A short-lived mark in the game's slot: the replicated write a Cluster shard's round above the
    "primary" ack level waits for (server.store.redis._adapter)."""
    return f"orchestra:{{{game_id}}}:acked"


def commands_key(game_id: str) -> str:
    """The game's command-key outcomes, for idempotent appends."""
    return f"orchestra:{{{game_id}}}:commands"


def presence_key(game_id: str) -> str:
    """Who is connected to the game, per node (server.engine.presence), beside its stream."""
    return f"orchestra:{{{game_id}}}:presence"


def rate_key(bucket: str) -> str:
    """A rate bucket shared by the nodes (server.store.port.EventStore.take_token), in a slot of its own."""
    return f"orchestra:rate:{{{bucket}}}"


def appended_channel(game_id: str, db: int = 0) -> str:
    """The pub/sub channel on which the game's appends announce its new version.

    Channels are shared by all databases of a Redis; the database number keeps deployments on different
    databases of one Redis from waking each other's tails.
    """
    return f"orchestra:{{{game_id}}}:appended" if db == 0 else f"orchestra:{{{game_id}}}:appended:{db}"


# A fenced game (being archived) takes no more appends: its commands hash holds the field FENCE (command
# keys are "<seat>:<id>", so no command key can be it). A repeat of an accepted command still gets its
# first outcome.
FENCE_FIELD = "!fenced"
