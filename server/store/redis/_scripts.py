"""The Lua scripts that change the store's keys (`server.store.redis.keys`) atomically, one call each."""

from __future__ import annotations

# KEYS: events, auth[, channel]. ARGV: first envelope, then credential field/value pairs -> the Redis
# clock (s, us). A stale credentials hash without a stream (a half-deleted game) must not leak into the
# new game. With a channel, version 1 is published on it, as APPEND_MANY publishes every later version.
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

# KEYS: events, auth, commands[, channel]. ARGV: n, the n envelopes, c, c credential field/value pairs,
# then command key/outcome ("first last") pairs -> n. A whole game written at once (an archived game coming
# back), or nothing: EXISTS when the game exists. As in CREATE, XADD is the first write (a full Redis
# refuses it, and so the whole game), and stale credentials or command records without a stream are
# dropped. The hashes are written a thousand values at a time: Lua's unpack returns a bounded number.
RESTORE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('EXISTS') end
local n = tonumber(ARGV[1])
for i = 1, n do
  redis.call('XADD', KEYS[1], '0-' .. i, 'e', ARGV[i + 1])
end
redis.call('DEL', KEYS[2], KEYS[3])
local function hset(key, first, last)
  for i = first, last, 1000 do
    redis.call('HSET', key, unpack(ARGV, i, math.min(i + 999, last)))
  end
end
local first_credential = n + 3
local last_credential = n + 2 + 2 * tonumber(ARGV[n + 2])
hset(KEYS[2], first_credential, last_credential)
hset(KEYS[3], last_credential + 1, #ARGV)
if KEYS[4] then redis.call('PUBLISH', KEYS[4], n) end
return n
"""

# Every append: many in one call, of any games on a standalone Redis, of one game in a Cluster (its keys
# share a slot). ARGV[1]: the keys of each append, 3 (events, commands, channel) or 2 (no channel: no
# notice). KEYS: those of each append in turn. ARGV from 2: per append, expected version, command key,
# after, the number n of envelopes, then the n envelopes. Each append is checked and written in order and
# gets its own result: {first, last, duplicate}, or {-1, 'CONFLICT <v>' | 'CHANGED' | 'NOGAME' | 'FENCED'}.
# With a channel (standalone Redis), the new version is published on it; a Cluster would broadcast every
# publish to all its nodes, so there tails block on XREAD instead.
# The version is the top entry's id, never XLEN: XLEN would lie after any trim or deletion. The command
# key is checked before the version, because a retried command must get its first outcome back even when
# other commands have moved the game on since. `after` is the SHA-1 (hex) of the line the caller holds at
# the expected version, or '' to skip the check: another line there (acknowledged appends lost, others
# written at their versions since) answers CHANGED. SHA-1 only names a line without sending it: whoever
# could forge a collision could write the stream directly anyway.
# A game's appends are a chain (each decided on the state the ones before it leave): after one that wrote
# nothing, the game's later ones write nothing and get CONFLICT with its version (NOGAME without a stream).
APPEND_MANY = """
local stride = tonumber(ARGV[1])
local results = {}
local stopped = {}
local a = 2
local function at_top(events)
  local top = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
  if #top == 0 then return nil end
  return tonumber(string.match(top[1][1], '^0%-(%d+)$')), top[1][2][2]
end
for i = 1, #KEYS, stride do
  local events, commands = KEYS[i], KEYS[i + 1]
  local expected, key, after, n = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3])
  local first_envelope = a + 4
  a = a + 4 + n
  local result
  local seen = not stopped[events] and redis.call('HGET', commands, key)
  if seen then
    local first, last = string.match(seen, '^(%d+) (%d+)$')
    result = {tonumber(first), tonumber(last), 1}
  elseif not stopped[events] and redis.call('HEXISTS', commands, '!fenced') == 1 then
    result = {-1, 'FENCED'}
  else
    local version, line = at_top(events)
    if version == nil then
      result = {-1, 'NOGAME'}
    elseif stopped[events] or version ~= expected then
      result = {-1, 'CONFLICT ' .. version}
    elseif after ~= '' and redis.sha1hex(line) ~= after then
      result = {-1, 'CHANGED'}
    else
      for j = first_envelope, first_envelope + n - 1 do
        version = version + 1
        redis.call('XADD', events, '0-' .. version, 'e', ARGV[j])
      end
      redis.call('HSET', commands, key, (expected + 1) .. ' ' .. version)
      if stride == 3 then redis.call('PUBLISH', KEYS[i + 2], version) end
      result = {expected + 1, version, 0}
    end
  end
  if result[1] < 0 or result[3] == 1 then stopped[events] = true end
  results[#results + 1] = result
end
return results
"""

# KEYS: INDEX_KEYS. ARGV: game id, score (its creation time in us; '' for its score in orchestra:games, or
# now when it has none), live ('1' or '0'), the cap on live games (0: none)[, listing] -> 1. A game
# indexed as live into a store holding the cap already is refused (TOOMANY) and nothing is written.
# ZADD is the first write: a Redis at `maxmemory` refuses a script's first write that needs memory, so a
# full Redis refuses the whole index entry. Scores stay strings: a Lua number would lose digits.
INDEX = """
local id = ARGV[1]
local live = ARGV[3] == '1'
local cap = tonumber(ARGV[4])
if live and cap > 0 and redis.call('SISMEMBER', KEYS[4], id) == 0 and redis.call('SCARD', KEYS[4]) >= cap then
  return redis.error_reply('TOOMANY')
end
local score = ARGV[2]
if score == '' then
  score = redis.call('ZSCORE', KEYS[1], id)
  if not score then
    local now = redis.call('TIME')
    score = now[1] .. string.format('%06d', tonumber(now[2]))
  end
end
redis.call('ZADD', KEYS[1], 'NX', score, id)
if ARGV[5] then
  redis.call('ZADD', KEYS[2], 'NX', score, id)
  redis.call('HSET', KEYS[3], id, ARGV[5])
end
if live then redis.call('SADD', KEYS[4], id) else redis.call('SREM', KEYS[4], id) end
redis.call('SADD', KEYS[5], id)
return 1
"""

# KEYS: INDEX_KEYS. ARGV: game id. Removes the game from every part of the index (archiving).
UNINDEX = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('SREM', KEYS[5], ARGV[1])
return 1
"""

# KEYS: public, listing. ARGV: how many -> {ids newest first, their listings}, read together.
LISTED = """
local ids = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then return {{}, {}} end
return {ids, redis.call('HMGET', KEYS[2], unpack(ids))}
"""

# KEYS: public, live. ARGV: how many, live only ('1' or '0') -> the ids of the newest listed games (with
# live only, of the listed games in the live set), newest first. ZINTER walks the smaller of the two sets
# (the live ones, normally), whatever the number of ended public games.
PUBLIC_IDS = """
local limit = tonumber(ARGV[1])
if ARGV[2] ~= '1' then return redis.call('ZREVRANGE', KEYS[1], 0, limit - 1) end
local ids = redis.call('ZINTER', 2, KEYS[1], KEYS[2], 'WEIGHTS', 1, 0)
local newest = {}
for i = #ids, math.max(1, #ids - limit + 1), -1 do newest[#newest + 1] = ids[i] end
return newest
"""

# KEYS: events, commands -> the game's version (0: no such game, nothing written). From now on every
# append to the game fails with FENCED.
FENCE = """
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #top == 0 then return 0 end
redis.call('HSET', KEYS[2], '!fenced', 1)
return tonumber(string.match(top[1][1], '^0%-(%d+)$'))
"""

# Presence (standalone Redis; on a Cluster, where keys of many slots cannot meet in a script, the same
# commands go in a pipeline). KEYS: presence hashes. ARGV: node, time to live (ms), then each key's value
# ('' removes the node's field, which leaves the hash's expiry as it was).
WRITE_PRESENCE = """
for i, key in ipairs(KEYS) do
  local value = ARGV[2 + i]
  if value == '' then
    redis.call('HDEL', key, ARGV[1])
  else
    redis.call('HSET', key, ARGV[1], value)
    redis.call('PEXPIRE', key, ARGV[2])
  end
end
return #KEYS
"""

# KEYS: presence hashes -> each one's fields and values, flat ({} for none).
READ_PRESENCE = """
local found = {}
for i, key in ipairs(KEYS) do found[i] = redis.call('HGETALL', key) end
return found
"""

# KEYS: orchestra:games (any fixed key: on a Cluster, every node asks the same Redis) -> Redis's TIME.
STORE_TIME = """
return redis.call('TIME')
"""

# A rate bucket shared by the nodes (generic cell rate: the key holds the time, in ms of Redis's clock, at
# which the bucket will be full again). KEYS: the bucket. ARGV: ms per token, burst -> 0 when a token was
# spent, else the ms until one can be. Redis's clock, not the nodes': they need not agree.
TAKE_TOKEN = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local interval = tonumber(ARGV[1])
local limit = interval * tonumber(ARGV[2])
local full = tonumber(redis.call('GET', KEYS[1]) or '0')
if full < now then full = now end
local after = full + interval
if after - now > limit then return tostring(after - now - limit) end
redis.call('SET', KEYS[1], string.format('%.3f', after), 'PX', math.max(1, math.ceil(after - now)))
return 0
"""

# KEYS: events, auth, commands. ARGV: the version the game must be at. Deletes the three keys only if the
# game is still at that version (else CONFLICT <version>), so no append that landed after the caller read
# the game is lost with them.
DELETE_AT = """
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local version = 0
if #top > 0 then version = tonumber(string.match(top[1][1], '^0%-(%d+)$')) end
if version ~= tonumber(ARGV[1]) then return redis.error_reply('CONFLICT ' .. version) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return version
"""
