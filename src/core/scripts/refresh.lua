-- Extend a lease if our token still holds it.
-- KEYS[1] lock
-- ARGV[1] token, ARGV[2] new ttl in ms
-- Returns 1 when extended, 0 when the lease was no longer ours (nothing changed).
if not owns(redis.call('GET', KEYS[1]), ARGV[1]) then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
