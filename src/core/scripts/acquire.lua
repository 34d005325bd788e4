-- Take a lease if it is free: SET NX PX and the next fencing token, atomically.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiter marker, KEYS[4] void marker of this token
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] how long the caller will wait, in ms (0: not waiting)
-- Returns {1, fence} when taken, {0, pttl} when held by another (pttl -1: held without expiry).
if redis.call('EXISTS', KEYS[1], KEYS[4]) == 0 then
  -- Tokens never fall below the server clock in microseconds, so they keep rising
  -- even if the counter is lost (restart without persistence, failover to a stale
  -- replica). Usually the clock is ahead of the counter: one SET ... GET does it.
  local t = redis.call('TIME')
  local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('SET', KEYS[2], string.format('%.0f', fence), 'GET'))
  if last and last >= fence then
    fence = last + 1
    redis.call('SET', KEYS[2], string.format('%.0f', fence))
  end
  fence = string.format('%.0f', fence)
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'NX', 'PX', ARGV[2])
  return {1, fence}
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  -- This attempt arrived after its sender gave up on it and voided the token.
  return {0, -2}
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
