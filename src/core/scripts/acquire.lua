-- Model: tests/model/redis.rs, Script::acquire (one atomic step, every mode).
-- Take a lock (alone, or shared with other readers) or a semaphore permit if it
-- is free and nobody queues before us; otherwise queue for it.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms,
-- KEYS[5] void marker of this token, KEYS[6] shared holds (readers, permits),
-- KEYS[7] the permits' weights ('p' only)
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] how long the caller will still wait,
-- in ms (0: it will not, and leaves the queue), ARGV[4] mode: 'w' alone, 'r' as a
-- reader, 'u' alone, for a token that holds it as a reader (an upgrade), 'd' as a
-- reader, for a token that holds it alone (a downgrade), 'p' permits; ('p'
-- only:) ARGV[5] the semaphore's limit, ARGV[6] how many permits at once
-- Returns 1 when it took the lock alone on the fast path (its fence left
-- unassigned, see below: a bare number is the cheapest reply Redis builds),
-- {1, fence} when it took it otherwise ('0' for a shared hold), {2, fence} when
-- it was handed to us while we waited, {0, pttl} when others hold it (pttl: until the first of their leases ends; -1:
-- no expiry), {0, -2} when this token was voided (its sender gave up on this
-- attempt), {-3, 0} for an upgrade while another reader waits to upgrade (each
-- would wait for the other for ever), and {-4, 0} for a conversion whose own
-- hold ran out. Every answer but {0, pttl} with a wait leaves the token out of
-- the queue: a caller that is told no never waits again on this token.
local lock, waiters, terms, holders, token = KEYS[1], KEYS[3], KEYS[4], KEYS[6], ARGV[1]
local ttl, wait, mode, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
-- Redis 7.0 turns a number given to redis.call back into text with a printf
-- (~0.7 µs; 7.2 and later convert whole numbers cheaply): where the text is at
-- hand (the ttl, fixed places), it is passed as it is.
local ttl_text = ARGV[2]
-- Only a semaphore's permits weigh (a lock's readers count one each).
local weight = tonumber(ARGV[6]) or 1
local weights = mode == 'p' and KEYS[7] or nil
-- The common case first: nobody queues, this token was not voided, the lock is
-- free. Its fencing token is left unassigned (fence.lua assigns it when the holder
-- asks): most holders never ask, and it saves the counter's write.
if mode == 'w' then
  if redis.call('EXISTS', KEYS[5], waiters, holders) == 0
      and redis.call('SET', lock, token .. ':', 'NX', 'PX', ttl_text) then
    return 1
  end
elseif mode == 'r' then
  if redis.call('EXISTS', KEYS[5], waiters, lock) == 0 then
    add_holder(holders, token, ttl, now_ms())
    return {1, '0'}
  end
elseif mode == 'p' then
  -- NX: a token that holds a permit already (handed to it while it waited) is
  -- left to the path below, which also clears its wake-up.
  if redis.call('EXISTS', KEYS[5], waiters) == 0 then
    local now = now_ms()
    local live, weighted = live_holders(holders, now, weights)
    if live + weight <= limit
        and redis.call('ZADD', holders, 'NX', now + ttl, token) == 1 then
      weigh(weights, token, weight)
      -- The weights' key is there only if it was before or this hold weighs.
      keep_holders(holders, now, (weighted or weight > 1) and weights or nil)
      return {1, '0'}
    end
  end
end
-- A voided token's fresh claims take nothing; its conversions act only on what it
-- holds (see resolve.lua).
if mode ~= 'u' and mode ~= 'd' and redis.call('EXISTS', KEYS[5]) == 1 then
  return {0, -2}
end
local value = redis.call('GET', lock)
if mode == 'd' and not owns(value, token) then
  return {-4, 0}
end
if owns(value, token) then
  if mode == 'r' or mode == 'd' then
    -- A writer taking it as a reader (a downgrade): nobody can come between,
    -- and readers queued at the head share it at once.
    redis.call('DEL', lock)
    local now = now_ms()
    add_holder(holders, token, ttl, now)
    grant(lock, holders, waiters, terms, KEYS[2], no_payload, now, nil, true)
    return {1, '0'}
  end
  -- Handed to us while we waited, and its wake-up was lost or not read yet.
  unwake(lock, token)
  return {2, string.sub(value, #token + 2)}
end
local now, now_us = clock()
local live = live_holders(holders, now, weights)
local reading = live > 0 and redis.call('ZSCORE', holders, token)
if mode == 'u' and not reading then
  -- Its read lease ran out while it waited: the upgrade is over, and so is its
  -- place in the queue (left there, a release would hand the lock to nobody).
  leave_queue(waiters, terms, token)
  return {-4, 0}
end
if reading and mode ~= 'u' then
  -- A shared hold handed to us while we waited (or one we have: kept).
  unwake(lock, token)
  return {2, '0'}
end
if not value then
  local first = first_waiter(waiters, terms, now)
  if not first or first == token then
    -- Taking comes first: under maxmemory, Redis refuses it with nothing changed.
    if (mode == 'w' and live == 0) or (mode == 'u' and live == (reading and 1 or 0)) then
      local fence = next_fence(KEYS[2], ttl, now_us)
      redis.call('SET', lock, token .. ':' .. fence, 'PX', ttl_text)
      if reading then
        redis.call('ZREM', holders, token)
      end
      leave_queue(waiters, terms, token)
      return {1, fence}
    elseif mode == 'r' or (mode == 'p' and live + weight <= limit) then
      add_holder(holders, token, ttl, now, weights, weight)
      leave_queue(waiters, terms, token)
      return {1, '0'}
    end
  end
  -- Free (or shareable) with others queued before us (a holder's lease ran out):
  -- first come, first served. What that serves may be us.
  grant(lock, holders, waiters, terms, KEYS[2], no_payload, now, weights)
  value = redis.call('GET', lock)
  if owns(value, token) then
    unwake(lock, token)
    return {2, string.sub(value, #token + 2)}
  end
  if mode ~= 'u' and redis.call('ZSCORE', holders, token) then
    unwake(lock, token)
    return {2, '0'}
  end
end
if mode == 'u' then
  -- Two readers each waiting for the other to leave would wait for ever: an
  -- upgrade is refused while another reader waits to upgrade.
  local first, _, _, first_mode = first_waiter(waiters, terms, now)
  if first and first ~= token and first_mode == 'u' then
    leave_queue(waiters, terms, token)
    return {-3, 0}
  end
end
if wait > 0 then
  -- A lock taken on the fast path has no fence yet, and its release trusts that
  -- to mean nobody queued since (lib.lua's let_go): it gets one now.
  if value and string.sub(value, -1) == ':' then
    redis.call('SET', lock, value .. next_fence(KEYS[2], math.max(redis.call('PTTL', lock), 0), now_us), 'KEEPTTL')
  end
  join_queue(waiters, terms, token, ttl, wait, now, mode, limit, weight)
  -- The caller now sleeps in BLPOP on its wake-up list, and takes what it finds
  -- there for a grant. Nothing is granted to this token now (else it would have
  -- been told so above), so what is there is stale: a grant it never read, whose
  -- lease has ended (it stalled past the ttl), or, for an upgrade, a reader's
  -- grant of the token's earlier claim, left there when that claim took its hold
  -- by another path. Cleared after the queue's writes: under maxmemory a
  -- script's first write must be the one refused.
  unwake(lock, token)
else
  leave_queue(waiters, terms, token)
end
-- How long until a holder's lease ends: the lock's, else the first shared one's.
-- Not by `live`: the grant above may have handed shared holds out since. Never
-- -2 (no key): that answer means a voided token, and its caller gives up.
local pttl = redis.call('PTTL', lock)
if pttl == -2 then
  local first = tonumber(redis.call('ZRANGE', holders, '0', '0', 'WITHSCORES')[2])
  pttl = first and math.max(first - now, 0) or 0
end
return {0, pttl}
