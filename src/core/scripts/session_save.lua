-- Model: tests/model/redis.rs, Script::session_save ('write'), Script::session_destroy
-- ('destroy') and Script::release ('unlock', sessions).
-- Save a session and unlock it, only while our lease still holds the lock; the
-- lock (with the data just saved) goes to the next waiting request, if any.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] waiters, KEYS[4] their terms, KEYS[5] the
-- tokens of holds a logout revoked (session_revoke.lua), ('destroy' only:)
-- KEYS[6] this token's destroy marker
-- ARGV[1] token, ARGV[2] data, ARGV[3] data ttl in seconds, ARGV[4] 'write' to
-- store ARGV[2], 'touch' to renew the data's ttl (lazy_write), 'destroy' to delete
-- it, 'unlock' to leave it as it is; ('destroy' only:) ARGV[5] how long the
-- marker lasts, in ms
-- Returns 1 when saved and unlocked (a destroy: or when its marker says an
-- earlier run of it did), 0 when the lease was lost, 2 when a logout revoked it
-- (nothing changed in either case but, a destroy's or a write's, the revoked
-- set's expiry, set again).
local data_key, lock, op = KEYS[1], KEYS[2], ARGV[4]
if not owns(redis.call('GET', lock), ARGV[1]) then
  -- Revoked, the token cannot have saved before: the revocation found it
  -- holding, and nothing it sends runs after.
  if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 1 then
    -- A destroy or a write then counts on that logout (reported done: the
    -- session is logged out), which another link wrote and may not have seen
    -- replicated: a write here, after it in the replication stream, is what
    -- this link's WAIT can count. (In its last millisecond too, or that WAIT
    -- counts an older write. A set someone made persistent is left so.) A
    -- touch or unlock carried no change, and counts on nothing.
    local left = redis.call('PTTL', KEYS[5])
    if (op == 'destroy' or op == 'write') and left >= 0 then
      redis.call('PEXPIRE', KEYS[5], math.max(left, 1))
    end
    return 2
  end
  -- A destroy run again after a lost reply: its first run did it if it left
  -- the marker (data there since is another request's, not to be destroyed
  -- again, nor revoked as a logout would). Renewed, not just read: a WAIT
  -- counts the writes of its own link, and this one comes after the first run's.
  if op == 'destroy' and redis.call('PEXPIRE', KEYS[6], ARGV[5]) == 1 then
    return 1
  end
  return 0
end
if op == 'write' then
  redis.call('SET', data_key, ARGV[2], 'EX', ARGV[3])
elseif op == 'touch' then
  redis.call('EXPIRE', data_key, ARGV[3])
elseif op == 'destroy' then
  redis.call('DEL', data_key)
  -- For a run of this destroy that comes again (see above).
  redis.call('SET', KEYS[6], '1', 'PX', ARGV[5])
end
local function payload()
  if op == 'write' then
    return 'd' .. ARGV[2]
  elseif op == 'destroy' then
    return 'n'
  end
  local data = redis.call('GET', data_key)
  return data and 'd' .. data or 'n'
end
pass_on(lock, KEYS[3], KEYS[4], nil, payload)
return 1
