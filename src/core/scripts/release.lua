-- Model: tests/model/redis.rs, Script::release (one atomic step).
-- Release our lock, handing it to the first waiter if anyone waits.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms,
-- KEYS[5] (Redis Cluster) this token's done marker
-- ARGV[1] token, ARGV[2] how long the done marker lasts, in ms
-- Returns 1 when released, 0 when the lock was no longer ours (nothing changed),
-- 2 when this token's own earlier run released it (see mark_done).
if not owns(redis.call('GET', KEYS[1]), ARGV[1]) then
  return done_before(KEYS[5], ARGV[2])
end
pass_on(KEYS[1], KEYS[3], KEYS[4], KEYS[2], no_payload)
mark_done(KEYS[5], ARGV[2])
return 1
