-- Model: tests/model/redis.rs, the methods of `Script` named after these functions.
-- Shared by the lease scripts: scripts.rs puts what each one uses in front of it when it
-- is loaded (EVALSHA scripts cannot call each other).
--
-- A lock's value is '<token>:<fence>'; the fence is empty until assigned (an
-- uncontended acquire leaves it to fence.lua, run when its holder asks for it). Requests that wait for it queue beside it:
-- <lock>:waiters, a sorted set of their tokens in arrival order, and <lock>:terms,
-- a hash of each waiter's '<ttl> <deadline> <heard until>' (ms). A waiter sleeps in
-- BLPOP on its own list, <lock>:wake:<token>. A release never leaves a lock free
-- while someone waits: it sets the lock to the first waiter's token and pushes onto
-- that waiter's list, whose BLPOP then returns holding the lock.
--
-- A waiter asks again at least every NAP_MS (the client's longest nap), which
-- renews its 'heard until'. One not heard from by then may be dead (killed in its
-- BLPOP): it is passed over, keeping its place until its deadline, rather than
-- handed a lock it would hold for its whole ttl.
--
-- Under maxmemory, Redis refuses a script's first write if it may grow memory
-- (SET, RPUSH, ZADD, HSET), and lets every later write through. So a script that
-- takes a lease writes nothing before its SET (an OOM error then means nothing
-- changed), and one that frees a lease starts with a write that frees memory
-- (DEL, ZREM, HDEL), so that it always runs to the end.

-- How long a fencing counter outlives its last grant. Tokens stay strictly
-- increasing after it expires, because they never fall below the server clock in
-- microseconds: the clock has moved past the last token by then, unless it stepped
-- back by more than this.
local FENCE_KEEP_MS = 3600000

-- How long a wake-up list outlives its waiter's deadline, if never read.
local WAKE_KEEP_MS = 1000

-- A waiter's longest nap (lease.rs's MAX_NAP), and how late its next word may be.
local NAP_MS = 1000
local HEARD_SLACK_MS = 1000

local function owns(value, token)
  return value and string.sub(value, 1, #token + 1) == token .. ':'
end

-- The server clock in ms, and in µs (for a fence granted in the same script:
-- one TIME call less).
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

local function now_ms()
  return (clock())
end

-- The next fencing token of a lock: above every one granted before, and at least
-- the server clock in microseconds (so tokens keep rising when the counter is
-- lost: a restart without persistence, a failover to a replica that missed the
-- last grants, or the counter's expiry). Usually one SET ... GET does it.
-- `now_us`: the clock as this script read it (clock()), if it did; a script is
-- atomic, so no other reading comes between.
local function next_fence(fence_key, ttl, now_us)
  local fence = now_us or select(2, clock())
  -- Formatted once: each string.format is a printf.
  local text = string.format('%.0f', fence)
  local keep = ttl + FENCE_KEEP_MS
  local last = tonumber(redis.call('SET', fence_key, text, 'PX', keep, 'GET'))
  if last and last >= fence then
    text = string.format('%.0f', last + 1)
    redis.call('SET', fence_key, text, 'PX', keep)
  end
  return text
end

local function leave_queue(waiters, terms, token)
  redis.call('ZREM', waiters, token)
  redis.call('HDEL', terms, token)
end

-- A waiter's terms are '<ttl> <deadline> <heard until>[ <mode>[ <limit>[ <weight>]]]'
-- (ms). Modes: 'w' (the default) takes the lock alone; 'r' shares it with other
-- readers; 'u' is a reader waiting to take it alone (an upgrade); 'p' takes
-- <weight> (1 when not said) of <limit> permits of a semaphore.
local function parse_terms(text)
  local ttl, deadline, heard, mode, limit, weight = string.match(text or '',
    '^(%d+) (%d+) (%d+) ?(%a?) ?(%d*) ?(%d*)$')
  if not ttl then
    return nil
  end
  return tonumber(ttl), tonumber(deadline), tonumber(heard), mode ~= '' and mode or 'w',
    tonumber(limit), tonumber(weight) or 1, ttl
end

-- The first waiter at or after place `i` within its deadline and heard from
-- lately: token, ttl, deadline, mode, limit, its place, weight and ttl as text.
-- Those whose deadline passed (they gave up, or died) are dropped on the way;
-- those not heard from lately are passed over.
local function waiter_from(waiters, terms, now, i)
  while true do
    -- The first place as text: Redis 7.0 prints a number given to redis.call.
    local place = i == 0 and '0' or i
    local token = redis.call('ZRANGE', waiters, place, place)[1]
    if not token then
      return nil
    end
    local ttl, deadline, heard, mode, limit, weight, ttl_text =
      parse_terms(redis.call('HGET', terms, token))
    if not ttl or deadline <= now then
      leave_queue(waiters, terms, token)
    elseif heard <= now then
      i = i + 1
    else
      return token, ttl, deadline, mode, limit, i, weight, ttl_text
    end
  end
end

local function first_waiter(waiters, terms, now)
  return waiter_from(waiters, terms, now, 0)
end

-- Queues `token` (keeping its place if it is already queued, or, for an upgrade,
-- ahead of everyone) until now + wait. A waiter is scored with its arrival in µs
-- of the server clock, so that operators see how long each has waited
-- (survey.lua); one more than the last keeps arrivals within a µs in order, and
-- entries scored 1, 2, 3... by earlier versions stay ahead. '%.0f': Lua would
-- round such a number to 14 digits.
local function join_queue(waiters, terms, token, ttl, wait, now, mode, limit, weight)
  if not redis.call('ZSCORE', waiters, token) then
    local score
    if mode == 'u' then
      local first = tonumber(redis.call('ZRANGE', waiters, '0', '0', 'WITHSCORES')[2])
      score = first and first - 1 or now * 1000
    else
      local last = tonumber(redis.call('ZRANGE', waiters, '-1', '-1', 'WITHSCORES')[2])
      score = math.max(now * 1000, (last or 0) + 1)
    end
    redis.call('ZADD', waiters, string.format('%.0f', score), token)
  end
  local heard = now + math.min(wait, NAP_MS) + HEARD_SLACK_MS
  local text = ttl .. ' ' .. (now + wait) .. ' ' .. heard
  if mode and mode ~= 'w' then
    text = text .. ' ' .. mode .. (limit and (' ' .. limit) or '')
      .. ((weight or 1) > 1 and (' ' .. weight) or '')
  end
  redis.call('HSET', terms, token, text)
  -- The queue lasts as long as its longest waiter.
  local keep = wait + WAKE_KEEP_MS
  if redis.call('PTTL', waiters) < keep then
    redis.call('PEXPIRE', waiters, keep)
    redis.call('PEXPIRE', terms, keep)
  end
end

-- Shared holds (read locks, semaphore permits) are a sorted set of tokens, each
-- scored with the moment its lease ends (server ms); the set itself expires with
-- its last lease. A hold of several permits at once (a weight above 1) keeps its
-- weight in <lock>:weights, which also keeps (under the field '') the sum of
-- what the weights add to the set's count; a hold without an entry weighs 1.

-- Takes `token`'s weight off the sum, for a hold that leaves the set.
local function unweigh(weights, token)
  if weights and redis.call('EXISTS', weights) == 1 then
    local w = tonumber(redis.call('HGET', weights, token))
    if w then
      redis.call('HDEL', weights, token)
      if redis.call('HINCRBY', weights, '', 1 - w) <= 0 then
        redis.call('DEL', weights)
      end
    end
  end
end

-- Takes `token` out of the shared holds.
local function drop_holder(holders, token, weights)
  redis.call('ZREM', holders, token)
  unweigh(weights, token)
end

-- How many shared holds (permits: their weights) are alive at `now`; those that
-- ran out are dropped. Second: whether the weights' key was there (most
-- semaphores never weigh: their calls on it are skipped).
local function live_holders(holders, now, weights)
  if not holders or redis.call('EXISTS', holders) == 0 then
    return 0, false
  end
  local weighted = weights and redis.call('EXISTS', weights) == 1
  if weighted then
    for _, token in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', now)) do
      unweigh(weights, token)
    end
  end
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  local extra = weighted and tonumber(redis.call('HGET', weights, '')) or 0
  return redis.call('ZCARD', holders) + extra, weighted
end

-- The set, and the weights beside it, last as long as the last lease in it.
local function keep_holders(holders, now, weights)
  local last = tonumber(redis.call('ZRANGE', holders, '-1', '-1', 'WITHSCORES')[2])
  if last and last > now then
    redis.call('PEXPIRE', holders, last - now)
    if weights then
      redis.call('PEXPIRE', weights, last - now)
    end
  end
end

-- Records that `token`, new in the set, holds `weight` permits.
local function weigh(weights, token, weight)
  if weight > 1 then
    redis.call('HSET', weights, token, weight)
    redis.call('HINCRBY', weights, '', weight - 1)
  end
end

-- Gives `token` a shared hold until now + ttl (of `weight` permits, when new).
local function add_holder(holders, token, ttl, now, weights, weight)
  if redis.call('ZADD', holders, now + ttl, token) == 1 then
    weigh(weights, token, weight or 1)
  end
  keep_holders(holders, now, weights)
end

-- Wakes a waiter that was just granted what it waited for, with '<fence>:<body>'.
local function wake_up(lock, token, deadline, now, message)
  local wake = lock .. ':wake:' .. token
  redis.pcall('RPUSH', wake, message)
  redis.pcall('PEXPIRE', wake, deadline - now + WAKE_KEEP_MS)
end

-- Hands what is free to the waiters at the head of the queue, first come first
-- served (see first_waiter): the lock alone to a writer when nobody holds it
-- (with a fresh fence when fence_key is given, for its ttl; '<fence>:<payload()>'
-- goes onto its wake-up list); with `holders`, shared holds to the consecutive
-- readers at the head, or permits while a waiter's weight still fits under its
-- limit. It stops at the first waiter it cannot serve: later ones never overtake
-- it (a large request at the head is not starved by small ones behind it).
-- True when it handed anything. `now` (ms) may be nil: the clock is read only
-- when someone queues. `freed`: the caller deleted the lock earlier in this
-- script and wrote it no more, or it is a semaphore's, which nothing sets: free
-- without asking (one call less on the way to the waiter's wake-up).
local function grant(lock, holders, waiters, terms, fence_key, payload, now, weights, freed)
  if redis.call('EXISTS', waiters) == 0 or (not freed and redis.call('EXISTS', lock) == 1) then
    return false
  end
  local now_us
  if not now then
    now, now_us = clock()
  end
  local live = live_holders(holders, now, weights)
  local handed = false
  local i = 0
  while true do
    local token, ttl, deadline, mode, limit, at, weight, ttl_text = waiter_from(waiters, terms, now, i)
    if not token then
      return handed
    end
    -- An upgrade is only ever a reader's: one whose read hold ended (ran out, or
    -- was released after its upgrade gave up) has nothing to upgrade, and leaves.
    local mine = mode == 'u' and holders and redis.call('ZSCORE', holders, token)
    if mode == 'u' and not mine then
      leave_queue(waiters, terms, token)
    elseif mode == 'w' or mode == 'u' then
      -- An upgrading reader may be the one holder left: it becomes the writer.
      if live > (mine and 1 or 0) then
        return handed
      end
      local body = payload()
      leave_queue(waiters, terms, token)
      if mine then
        redis.call('ZREM', holders, token)
      end
      local fence = '0'
      if fence_key then
        fence = next_fence(fence_key, ttl, now_us)
      end
      redis.call('SET', lock, token .. ':' .. fence, 'PX', ttl_text)
      wake_up(lock, token, deadline, now, fence .. ':' .. body)
      return true
    elseif mode == 'p' and live + weight > (limit or 0) then
      return handed
    else
      leave_queue(waiters, terms, token)
      add_holder(holders, token, ttl, now, weights, weight)
      wake_up(lock, token, deadline, now, '0:')
      live = live + weight
      handed = true
    end
    -- The next waiter now stands where this one stood.
    i = at
  end
end

-- Hands the free lock to the first waiter (sessions: an exclusive lock, whose
-- payload carries its data). True when handed. `freed`: as grant's.
local function hand_off(lock, waiters, terms, fence_key, payload, now, freed)
  return grant(lock, nil, waiters, terms, fence_key, payload, now, nil, freed)
end

local function no_payload()
  return ''
end

-- A session handed on without its data: the waiter reads it itself.
local function no_data()
  return 'n'
end

-- Lets go of a lock its caller holds: handed to the first waiter (see
-- hand_off), or deleted when nobody waits.
local function pass_on(lock, waiters, terms, fence_key, payload)
  redis.call('DEL', lock)
  hand_off(lock, waiters, terms, fence_key, payload, nil, true)
end

-- Lets go of `token`'s hold on a lock or semaphore: the lock alone, or a shared
-- hold; what that frees goes to the waiters at the head of the queue (see
-- grant). True when the token held something. `permit`: a semaphore's, whose
-- lock key nothing sets (so grant need not ask either).
local function let_go(lock, holders, waiters, terms, fence_key, token, weights, permit)
  if not permit then
    local value = redis.call('GET', lock)
    if value == token .. ':' then
      -- Taken on the fast path, its fence still unassigned: nobody has queued
      -- since (a waiter that joins assigns it, acquire.lua), so there is nobody
      -- to hand it to.
      redis.call('DEL', lock)
      return true
    end
    if owns(value, token) then
      redis.call('DEL', lock)
      grant(lock, holders, waiters, terms, fence_key, no_payload, nil, weights, true)
      return true
    end
  end
  -- A shared hold whose lease ran out lingers until a script drops it: it
  -- was not ours to release any more.
  local ends = holders and tonumber(redis.call('ZSCORE', holders, token))
  if not ends then
    return false
  end
  drop_holder(holders, token, weights)
  local now = now_ms()
  if ends <= now then
    return false
  end
  grant(lock, holders, waiters, terms, fence_key, no_payload, now, weights, permit)
  return true
end

-- The session data at data_key, for a caller who holds its lock. Data it cannot
-- read (a key of another type) is returned as the error, second, after the lock
-- was given up rather than held for what it cannot use.
local function read_held_data(data_key, lock, waiters, terms)
  local data = redis.pcall('GET', data_key)
  if type(data) == 'table' and data.err then
    pass_on(lock, waiters, terms, nil, no_data)
    return nil, data
  end
  return data
end

-- A waiter's wake-up list is a key no script can declare (a releaser does not
-- know the waiter's token in advance). During a Cluster slot migration Redis
-- refuses such keys ("non local key"): those calls may fail without failing the
-- script, because a waiter asks again at least every NAP_MS and then finds the
-- lock handed to it.
local function unwake(lock, token)
  redis.pcall('DEL', lock .. ':wake:' .. token)
end
