-- Model: tests/model/redis.rs, Script::acquire (one atomic step).
-- Take a lock if it is free and nobody queues before us; otherwise queue for it.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms,
-- KEYS[5] void marker of this token
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] how long the caller will still wait,
-- in ms (0: it will not, and leaves the queue)
-- Returns {1, fence} when it took the lock (fence '' when left unassigned, see
-- below), {2, fence} when the lock was handed to us while we waited, {0, pttl} when another holds it (pttl -1: it has no expiry), and
-- {0, -2} when this token was voided (its sender gave up on this attempt).
local lock, waiters, terms, token = KEYS[1], KEYS[3], KEYS[4], ARGV[1]
local ttl, wait = tonumber(ARGV[2]), tonumber(ARGV[3])
-- The common case first: nobody queues, this token was not voided, the lock is
-- free. Its fencing token is left unassigned (fence.lua assigns it when the holder
-- asks): most holders never ask, and it saves the counter's write.
if redis.call('EXISTS', KEYS[5], waiters) == 0
    and redis.call('SET', lock, token .. ':', 'NX', 'PX', ttl) then
  return {1, ''}
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {0, -2}
end
local value = redis.call('GET', lock)
if owns(value, token) then
  -- Handed to us while we waited, and its wake-up was lost or not read yet.
  unwake(lock, token)
  return {2, string.sub(value, #token + 2)}
end
local now = now_ms()
if not value then
  local first = first_waiter(waiters, terms, now)
  if not first or first == token then
    -- Taking comes first: under maxmemory, Redis refuses it with nothing changed.
    local fence = next_fence(KEYS[2], ttl)
    redis.call('SET', lock, token .. ':' .. fence, 'PX', ttl)
    leave_queue(waiters, terms, token)
    return {1, fence}
  end
  -- Free with others queued before us (its holder's lease ran out): first come,
  -- first served.
  hand_off(lock, waiters, terms, KEYS[2], no_payload, now)
end
if wait > 0 then
  join_queue(waiters, terms, token, ttl, wait, now)
else
  leave_queue(waiters, terms, token)
end
return {0, redis.call('PTTL', lock)}
