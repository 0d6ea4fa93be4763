"""The Redis key layout of a game and the Lua scripts that change it atomically.

Every key of one game carries the game id as a hash tag (`{<game_id>}`), so in Redis Cluster all of
them live in one slot and a single script may touch them all:

    orchestra:{<game_id>}:events    stream; entry id 0-<version>; one field `e` = the envelope's bytes
    orchestra:{<game_id>}:auth      hash of the seat and watch credential hashes (secrets stay off events)
    orchestra:{<game_id>}:commands  hash command_key -> "first last" (the outcome a repeat gets back)
    orchestra:games                 sorted set of game ids, scored by creation time (Redis's clock, in us)

and one pub/sub channel, `orchestra:{<game_id>}:appended` (`...:appended:<db>` on a database other than
0), on which each append on a standalone Redis publishes the game's new version (nodes' tails wait for
it; see `server.store.redis._notify`).
"""

from __future__ import annotations

GAMES_KEY = "orchestra:games"
FIELD = b"e"


def events_key(game_id: str) -> str:
    """The game's stream of envelopes."""
    return f"orchestra:{{{game_id}}}:events"


def auth_key(game_id: str) -> str:
    """The game's credentials hash, beside its stream."""
    return f"orchestra:{{{game_id}}}:auth"


def commands_key(game_id: str) -> str:
    """The game's command-key outcomes, for idempotent appends."""
    return f"orchestra:{{{game_id}}}:commands"


def appended_channel(game_id: str, db: int = 0) -> str:
    """The pub/sub channel on which the game's appends announce its new version.

    Channels are shared by all databases of a Redis; the database number keeps deployments on different
    databases of one Redis from waking each other's tails.
    """
    return f"orchestra:{{{game_id}}}:appended" if db == 0 else f"orchestra:{{{game_id}}}:appended:{db}"


# KEYS: events, commands[, channel]. ARGV: expected version, command key, envelope...
# -> {first, last, duplicate}. With a channel (standalone Redis), the new version is published on it; a
# Cluster would broadcast every publish to all its nodes, so there tails block on XREAD instead.
# The version is the top entry's id, never XLEN: XLEN would lie after any trim or deletion. The command
# key is checked before the version, because a retried command must get its first outcome back even
# when other commands have moved the game on since.
APPEND = """
local seen = redis.call('HGET', KEYS[2], ARGV[2])
if seen then
  local first, last = string.match(seen, '^(%d+) (%d+)$')
  return {tonumber(first), tonumber(last), 1}
end
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #top == 0 then return redis.error_reply('NOGAME') end
local version = tonumber(string.match(top[1][1], '^0%-(%d+)$'))
local expected = tonumber(ARGV[1])
if version ~= expected then return redis.error_reply('CONFLICT ' .. version) end
for i = 3, #ARGV do
  version = version + 1
  redis.call('XADD', KEYS[1], '0-' .. version, 'e', ARGV[i])
end
redis.call('HSET', KEYS[2], ARGV[2], (expected + 1) .. ' ' .. version)
if KEYS[3] then redis.call('PUBLISH', KEYS[3], version) end
return {expected + 1, version, 0}
"""

# KEYS: events, auth[, channel]. ARGV: first envelope, then credential field/value pairs -> the Redis
# clock (s, us). A stale credentials hash without a stream (a half-deleted game) must not leak into the
# new game. With a channel, version 1 is published on it, as APPEND publishes every later version.
# XADD is the first write: a Redis at `maxmemory` refuses a script's first write that needs memory (OOM)
# but lets every later one through, so a DEL before it would let a full Redis take the game.
CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('EXISTS') end
redis.call('XADD', KEYS[1], '0-1', 'e', ARGV[1])
redis.call('DEL', KEYS[2])
if #ARGV > 1 then redis.call('HSET', KEYS[2], unpack(ARGV, 2)) end
if KEYS[3] then redis.call('PUBLISH', KEYS[3], 1) end
return redis.call('TIME')
"""

# Many appends in one call (standalone Redis only: in a Cluster the games' keys live in different slots).
# KEYS: events, commands, channel of each append in turn. ARGV: per append, expected version, command
# key, the number n of envelopes, then the n envelopes. Each append is checked and written exactly as APPEND
# does, in order, and gets its own result: {first, last, duplicate}, or {-1, 'CONFLICT <v>' | 'NOGAME'}.
APPEND_MANY = """
local results = {}
local a = 1
for i = 1, #KEYS, 3 do
  local events, commands, channel = KEYS[i], KEYS[i + 1], KEYS[i + 2]
  local expected, key, n = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  local first_envelope = a + 3
  a = a + 3 + n
  local seen = redis.call('HGET', commands, key)
  if seen then
    local first, last = string.match(seen, '^(%d+) (%d+)$')
    results[#results + 1] = {tonumber(first), tonumber(last), 1}
  else
    local top = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
    if #top == 0 then
      results[#results + 1] = {-1, 'NOGAME'}
    else
      local version = tonumber(string.match(top[1][1], '^0%-(%d+)$'))
      if version ~= expected then
        results[#results + 1] = {-1, 'CONFLICT ' .. version}
      else
        for j = first_envelope, first_envelope + n - 1 do
          version = version + 1
          redis.call('XADD', events, '0-' .. version, 'e', ARGV[j])
        end
        redis.call('HSET', commands, key, (expected + 1) .. ' ' .. version)
        redis.call('PUBLISH', channel, version)
        results[#results + 1] = {expected + 1, version, 0}
      end
    end
  end
end
return results
"""
