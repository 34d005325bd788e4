-- Model: tests/model/redis.rs, Script::session_revoke (one atomic step).
-- Destroy a session that this request does not hold: delete its data and revoke
-- whatever lease another request holds on it, so that request can no longer write
-- it back (its save is refused, and told it was revoked: see session_save.lua).
-- A logout must take effect even while another request of the session runs, or
-- is kept running on purpose.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] waiters, KEYS[4] their terms, KEYS[5] this
-- revocation's marker, KEYS[6] the tokens of holds revoked (a set)
-- ARGV[1] how long the marker lasts, in ms, ARGV[2] how long a revoked hold's
-- token is kept, in ms, ARGV[3] (optional) the data a read-only request read,
-- or '' with ARGV[4] 'exists': any data
-- Returns 1 when revoked now, 2 when this revocation's own earlier run did it;
-- negated when the data was no longer ARGV[3] (or there was none). A read-only
-- request that then moves to a fresh id (session_regenerate_id(true)) carries
-- what it read: that is written only if the session still held it, so that a
-- logout (or a save) by the holder in between is not undone under the new id;
-- one that saved the session early and moved on, only if it was not logged out
-- since. The marker keeps the answer for a run sent again.
-- A revocation sent again (its reply was lost) must act neither on a lease taken
-- since (the first run may have handed it on) nor on data saved since: every run
-- leaves its marker, set after the DEL so that under maxmemory (a script that has
-- written runs to its end) it is never the write refused. Found again, the marker
-- is written again, so that a WAIT that follows covers the first run's writes
-- (the replication stream keeps their order).
local first = redis.call('GET', KEYS[5])
if first then
  redis.call('PEXPIRE', KEYS[5], ARGV[1])
  return 2 * tonumber(first)
end
local same = 1
-- (pcall: data of another type is not what was read.)
if ARGV[4] == 'exists' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    same = -1
  end
elseif ARGV[3] and redis.pcall('GET', KEYS[1]) ~= ARGV[3] then
  same = -1
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[5], same, 'PX', ARGV[1])
-- (pcall: a lock key of another type is deleted all the same, as ever.)
local holder = redis.pcall('GET', KEYS[2])
if redis.call('DEL', KEYS[2]) == 1 then
  -- The revoked request's save is then refused as the logout's doing, not as
  -- a lease that ran out: told so, and not counted as lost (session_save.lua).
  if type(holder) == 'string' then
    local token = string.match(holder, '^[^:]*')
    redis.call('SADD', KEYS[6], token)
    redis.call('PEXPIRE', KEYS[6], ARGV[2])
    -- Handed the lock with the data and not woken yet, the holder must not
    -- pop the data as it was before the logout: it finds nothing, and asks
    -- again (session_open.lua), after the logout.
    unwake(KEYS[2], token)
  end
  hand_off(KEYS[2], KEYS[3], KEYS[4], nil, no_data, nil, true)
end
return same
