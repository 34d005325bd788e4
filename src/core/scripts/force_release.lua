-- Release a lock whoever holds it (an operator's or a framework's forced release:
-- Laravel's forceRelease(), a unique job's lock freed by its worker), handing it
-- to the waiters at the head of the queue as a release does, with a fresh fencing
-- token: a holder it was taken from is fenced off. Readers' shared holds are
-- released too.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms,
-- KEYS[5] shared holds
-- Returns 1 when it was held (now free or handed on), 0 when it was free.
local held = redis.call('DEL', KEYS[1], KEYS[5])
if held == 0 then
  return 0
end
grant(KEYS[1], KEYS[5], KEYS[3], KEYS[4], KEYS[2], no_payload, nil, nil, true)
return 1
