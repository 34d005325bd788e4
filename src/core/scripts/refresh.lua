-- Model: tests/model/redis.rs, Script::refresh (one atomic step).
-- Extend a lease if our token still holds it.
-- KEYS[1] lock
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] 'at_least' for the watchdog's
-- renewals, which never shorten a lease: one that overtakes the holder's own
-- refresh (sent on another link) cannot cut it back. Without it the expiry is
-- set to exactly the ttl (the holder's refresh, which may shorten it).
-- Returns 1 when extended, 0 when the lease was no longer ours (nothing changed).
-- Always a write when ours, even when the lease is long enough already: the WAIT
-- that follows must cover the expiry replicas will keep.
if not owns(redis.call('GET', KEYS[1]), ARGV[1]) then
  return 0
end
local ttl = tonumber(ARGV[2])
if ARGV[3] == 'at_least' then
  ttl = math.max(ttl, redis.call('PTTL', KEYS[1]))
end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
