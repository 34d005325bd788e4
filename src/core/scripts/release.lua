-- Release our lock, handing it to the first waiter if anyone waits.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms
-- ARGV[1] token
-- Returns 1 when released, 0 when the lock was no longer ours (nothing changed).
if not owns(redis.call('GET', KEYS[1]), ARGV[1]) then
  return 0
end
if not hand_off(KEYS[1], KEYS[3], KEYS[4], KEYS[2], no_payload, now_ms()) then
  redis.call('DEL', KEYS[1])
end
return 1
