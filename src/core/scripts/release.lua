-- Release a lease if our token still holds it, and wake one waiter.
-- KEYS[1] lock, KEYS[2] wake list, KEYS[3] waiter marker
-- ARGV[1] token
-- Returns 1 when released, 0 when the lease was no longer ours.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then
  return 0
end
redis.call('DEL', KEYS[1])
-- One pending wake-up is enough: only one waiter can take the lease. It expires
-- with the waiter marker, so a wake-up nobody takes does not linger.
local waiting = redis.call('PTTL', KEYS[3])
if waiting > 0 and redis.call('LLEN', KEYS[2]) == 0 then
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], waiting)
end
return 1
