-- Write a session this request does not hold, in one step: only while no request
-- holds its lock or waits for it, and, with ARGV[3] 'if', only when its data is
-- still ARGV[4] ('absent': when it has none, as a fresh id), what this request
-- last saw of it: a write after an early save must not overwrite what another
-- request saved in between, nor a write that lands late, after it timed out.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] waiters, KEYS[4] this write's marker
-- ARGV[1] data, ARGV[2] data ttl in seconds, ARGV[3] 'any', 'if' or 'absent',
-- ARGV[4] the data expected ('if'), ARGV[5] how long the marker lasts, in ms
-- Returns 1 when written, 0 when another request holds or waits for the lock
-- (nothing changed), -1 when the data is no longer what was expected.
-- A write sent again (its reply was lost) answers as its first run did and
-- writes nothing: in between, another request may have destroyed the session or
-- saved over it, and the check below may pass again. Its marker is written
-- again instead, so that a WAIT that follows covers the first run's write (the
-- replication stream keeps their order).
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
  return 1
end
if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
  return 0
end
-- Data that is already what we write is written again (nothing is lost).
local now = redis.call('GET', KEYS[1])
local as_seen = ARGV[3] == 'any' or (ARGV[3] == 'if' and now == ARGV[4])
  or (ARGV[3] == 'absent' and not now)
if not as_seen and now ~= ARGV[1] then
  return -1
end
-- The data first: under maxmemory, Redis refuses it with nothing changed.
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[4], '1', 'PX', ARGV[5])
return 1
