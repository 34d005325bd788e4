-- Model: tests/model/redis.rs, Script::refresh (one atomic step).
-- Extend a lease (the lock alone, or a shared hold) if our token still has it.
-- KEYS[1] lock, KEYS[2] shared holds, KEYS[3] their weights, KEYS[4] the ids of
-- this token's refreshes that were voided (a set), KEYS[5] (the watchdog's, for
-- a session) the tokens of holds a logout revoked
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] 'at_least' for the watchdog's
-- renewals, which never shorten a lease: one that overtakes the holder's own
-- refresh (sent on another link) cannot cut it back. Without it the expiry is
-- set to exactly the ttl (the holder's refresh, which may shorten it).
-- ARGV[4] (the holder's refresh) its id, ARGV[5...] the ids of the hold's
-- earlier refreshes that got no answer. Those may still arrive (a lossy network
-- delivers them late) and set an expiry other than the one the holder now
-- counts on, shorter perhaps: they are voided here, and change nothing then.
-- Returns 1 when extended, 0 when the lease was no longer ours, 2 when a logout
-- revoked it, 3 when a later refresh voided this one (nothing changed in these
-- three cases).
-- Always a write when ours, even when the lease is long enough already: the WAIT
-- that follows must cover the expiry replicas will keep.
local ttl, at_least, voided = tonumber(ARGV[2]), ARGV[3] == 'at_least', KEYS[4]
if ARGV[4] and redis.call('SISMEMBER', voided, ARGV[4]) == 1 then
  return 3
end

-- How long a command may still be on its way: a voided id is kept this long
-- past the lease it could cut (as lease.rs void_ttl keeps a void marker).
local LATE_MS = 60000

-- Under maxmemory an EVAL script is refused at its first write that may grow
-- memory, and every later write goes through: SADD comes after the PEXPIRE
-- that extends the lease, so that a refresh still runs.
local function void_earlier(left)
  if ARGV[5] then
    redis.call('SADD', voided, unpack(ARGV, 5))
  end
  redis.call('PEXPIRE', voided, left + LATE_MS)
end

if owns(redis.call('GET', KEYS[1]), ARGV[1]) then
  if at_least then
    ttl = math.max(ttl, redis.call('PTTL', KEYS[1]))
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  void_earlier(ttl)
  return 1
end
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
local now = now_ms()
if not ends or ends <= now then
  -- Revoked, not lost: the holder's save says so, and nobody is alerted.
  if KEYS[5] and redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 1 then
    return 2
  end
  return 0
end
if at_least then
  ttl = math.max(ttl, ends - now)
end
-- Run by EVAL under maxmemory, a script is refused at its first write that may
-- grow memory (ZADD, SADD): one that cannot comes first, so a renewal still runs
-- (keep_holders sets the key's expiry right after).
redis.call('PEXPIRE', KEYS[2], math.max(ttl, redis.call('PTTL', KEYS[2])))
void_earlier(ttl)
add_holder(KEYS[2], ARGV[1], ttl, now, KEYS[3])
return 1
