-- Write a session this request does not hold, in one step: only while no request
-- holds its lock or waits for it, and, with ARGV[3] 'if', only when its data is
-- still ARGV[4] ('absent': when it has none), what this request last saw of it:
-- a write after an early save must not overwrite what another request saved in
-- between.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] waiters
-- ARGV[1] data, ARGV[2] data ttl in seconds, ARGV[3] 'any', 'if' or 'absent',
-- ARGV[4] the data expected ('if')
-- Returns 1 when written, 0 when another request holds or waits for the lock
-- (nothing changed), -1 when the data is no longer what was expected.
if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
  return 0
end
-- Data already ours is written again: a run sent twice (its reply was lost) says
-- what the first did, and its write is what a WAIT that follows counts.
local now = redis.call('GET', KEYS[1])
local as_seen = ARGV[3] == 'any' or (ARGV[3] == 'if' and now == ARGV[4])
  or (ARGV[3] == 'absent' and not now)
if not as_seen and now ~= ARGV[1] then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
