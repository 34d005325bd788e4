-- Model: tests/model/redis.rs, Script::session_open (one atomic step).
-- Lock a session and read its data in one round trip, or queue for its lock.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] waiters, KEYS[4] their terms, KEYS[5] void
-- marker of this token, KEYS[6] the tokens of holds a logout revoked
-- ARGV[1] token, ARGV[2] lock ttl in ms, ARGV[3] how long the caller will still
-- wait, in ms (0: it will not, and leaves the queue), ARGV[4] most waiters (0: no
-- cap; a request that queued once asks with 0: it was counted in then)
-- Returns {1, data or nil} when it locked the session, {2, data or nil} when the
-- lock was handed to us while we waited,
-- {0, pttl} when another request holds it ({0, -2}: this token was voided), and
-- {-1, 0} when max_waiters requests already wait.
local data_key, lock, waiters, terms, token = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local ttl, wait, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
-- A token asks again after a grant it never counted on (it lapsed, or a logout
-- revoked it first): what it takes or queues for now is a new hold, whose saves
-- must not be told "revoked" for the old one (a destroy told so would not log
-- out: session.rs destroy()). Written after the SET or the queueing (maxmemory).
local function unrevoke()
  redis.call('SREM', KEYS[6], token)
end
-- The common case first: nobody queues, this token was not voided, the lock is
-- free, no logout revoked a hold of this session lately (rare: a logout by
-- another request while one held the lock). Read before locking: data of
-- another type fails here, with nothing locked; locking comes first among the
-- writes (under maxmemory, Redis refuses it with nothing changed).
if redis.call('EXISTS', KEYS[5], waiters, lock, KEYS[6]) == 0 then
  local data = redis.call('GET', data_key)
  -- ARGV[2], not ttl: Redis 7.0 prints a number given to redis.call (acquire.lua).
  redis.call('SET', lock, token .. ':0', 'PX', ARGV[2])
  return {1, data}
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {0, -2}
end
local value = redis.call('GET', lock)
if owns(value, token) then
  -- Handed to us while we waited, and its wake-up was lost or not read yet.
  unwake(lock, token)
  local data, err = read_held_data(data_key, lock, waiters, terms)
  if err then
    return err
  end
  return {2, data}
end
local now = now_ms()
if not value then
  local first = first_waiter(waiters, terms, now)
  if not first or first == token then
    -- Read before locking: data of another type fails here, with nothing locked.
    -- Locking comes first: under maxmemory, Redis refuses it with nothing changed.
    local data = redis.call('GET', data_key)
    redis.call('SET', lock, token .. ':0', 'PX', ARGV[2])
    leave_queue(waiters, terms, token)
    unrevoke()
    return {1, data}
  end
  hand_off(lock, waiters, terms, nil, function()
    local data = redis.call('GET', data_key)
    return data and 'd' .. data or 'n'
  end, now)
end
if wait > 0 then
  if cap > 0 and not redis.call('ZSCORE', waiters, token) and redis.call('ZCARD', waiters) >= cap then
    return {-1, 0}
  end
  join_queue(waiters, terms, token, ttl, wait, now)
  unrevoke()
  -- Stale, as in acquire.lua: the caller's BLPOP must not take it for a grant.
  unwake(lock, token)
else
  leave_queue(waiters, terms, token)
end
return {0, redis.call('PTTL', lock)}
