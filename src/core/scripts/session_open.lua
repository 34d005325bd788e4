-- Lock a session and read its data, in one round trip.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] waiters (sorted set: waiter id -> deadline in ms), KEYS[4] void marker of this token
-- ARGV[1] token, ARGV[2] lock ttl in ms, ARGV[3] how long the caller will wait, in ms (0: not waiting),
-- ARGV[4] waiter id, ARGV[5] most waiters allowed (0: no cap)
-- Returns {1, data or nil} when locked, {0, pttl} when locked by another request,
-- {-1, 0} when too many requests already wait for this session.
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0, -2}
end
if redis.call('SET', KEYS[2], ARGV[1] .. ':0', 'NX', 'PX', ARGV[2]) then
  -- A script error does not undo what it did: if the data cannot be read (a key of
  -- another type), unlock before failing.
  local data = redis.pcall('GET', KEYS[1])
  if type(data) == 'table' and data.err then
    redis.call('DEL', KEYS[2])
    return data
  end
  redis.call('ZREM', KEYS[3], ARGV[4])
  return {1, data}
end
local wait = tonumber(ARGV[3])
if wait > 0 then
  -- Waiters that gave up or died fall out when their deadline passes.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  local cap = tonumber(ARGV[5])
  if cap > 0 and not redis.call('ZSCORE', KEYS[3], ARGV[4]) and redis.call('ZCARD', KEYS[3]) >= cap then
    return {-1, 0}
  end
  redis.call('ZADD', KEYS[3], now + wait, ARGV[4])
  if redis.call('PTTL', KEYS[3]) < wait then
    redis.call('PEXPIRE', KEYS[3], wait)
  end
end
return {0, redis.call('PTTL', KEYS[2])}
