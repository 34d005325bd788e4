-- Release a lock whoever holds it (an operator's or a framework's forced release:
-- Laravel's forceRelease(), a unique job's lock freed by its worker), handing it
-- to the waiters at the head of the queue as a release does, with a fresh fencing
-- token: a holder it was taken from is fenced off. Readers' shared holds are
-- released too.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms,
-- KEYS[5] shared holds, KEYS[6] this forced release's marker
-- ARGV[1] how long the marker lasts, in ms
-- Returns 1 when it was held (now free or handed on), 0 when it was free.
-- Sent again (its reply was lost), it answers as its first run did and frees
-- nothing: the first run may have handed the lock to a waiter, who did nothing
-- wrong. The marker is written again then, so that a WAIT that follows covers
-- the first run (the replication stream keeps their order); the first run sets
-- it after the DEL, so that under maxmemory it is never the write refused.
local done = redis.call('GET', KEYS[6])
if done then
  redis.call('PEXPIRE', KEYS[6], ARGV[1])
  return tonumber(done)
end
-- A waiter handed the lock (or a reader its shared hold) that has not read its
-- wake-up yet would count on a grant taken from it before it knew of it,
-- beside the next holder: it finds nothing, and asks again.
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'string' then
  unwake(KEYS[1], string.match(holder, '^[^:]*'))
end
for _, token in ipairs(redis.pcall('ZRANGE', KEYS[5], '0', '-1')) do
  unwake(KEYS[1], token)
end
local held = redis.call('DEL', KEYS[1], KEYS[5])
redis.call('SET', KEYS[6], held > 0 and '1' or '0', 'PX', ARGV[1])
if held == 0 then
  return 0
end
grant(KEYS[1], KEYS[5], KEYS[3], KEYS[4], KEYS[2], no_payload, nil, nil, true)
return 1
