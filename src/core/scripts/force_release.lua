-- Release a lock whoever holds it (an operator's or a framework's forced release:
-- Laravel's forceRelease(), a unique job's lock freed by its worker), handing it
-- to the first waiter as a release does, with a fresh fencing token: a holder it
-- was taken from is fenced off.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms
-- Returns 1 when it was held (now free or handed on), 0 when it was free.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
pass_on(KEYS[1], KEYS[3], KEYS[4], KEYS[2], no_payload)
return 1
