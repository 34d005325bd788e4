-- Take a lease if it is free: SET NX PX and the next fencing token, atomically.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiter marker, KEYS[4] void marker of this token
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] how long the caller will wait, in ms (0: not waiting)
-- Returns {1, fence} when taken, {0, pttl} when held by another (pttl -1: held without expiry).
if redis.call('EXISTS', KEYS[4]) == 1 then
  -- This attempt arrived after its sender gave up on it and voided the token.
  return {0, -2}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- Tokens never fall below the server clock in microseconds, so they keep rising
  -- even if the counter is lost (restart without persistence, failover to a stale replica).
  local now = redis.call('TIME')
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local fence = string.format('%.0f', math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1, floor))
  redis.call('SET', KEYS[2], fence)
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'NX', 'PX', ARGV[2])
  return {1, fence}
end
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then
  return redis.error_reply('WRONGTYPE the lock key holds a value that is not a lock')
end
-- Tell releasers that someone waits, for as long as the longest waiter may wait.
local wait = tonumber(ARGV[3])
if wait > 0 and redis.call('PTTL', KEYS[3]) < wait then
  redis.call('SET', KEYS[3], '1', 'PX', wait)
end
return {0, redis.call('PTTL', KEYS[1])}
