-- Save a session and unlock it, only while our lease still holds the lock.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] wake list, KEYS[4] waiters
-- ARGV[1] token, ARGV[2] data, ARGV[3] data ttl in seconds,
-- ARGV[4] 'write' to store ARGV[2], 'touch' to only renew the data's ttl (lazy_write), 'destroy' to delete it
-- Returns 1 when saved and unlocked, 0 when the lease was lost (nothing is changed then).
local v = redis.call('GET', KEYS[2])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then
  return 0
end
if ARGV[4] == 'write' then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
elseif ARGV[4] == 'touch' then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
else
  redis.call('DEL', KEYS[1])
end
redis.call('DEL', KEYS[2])
-- Wake the next waiting request, as release.lua does.
local waiting = redis.call('PTTL', KEYS[4])
if waiting > 0 and redis.call('LLEN', KEYS[3]) == 0 then
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('PEXPIRE', KEYS[3], waiting)
end
return 1
