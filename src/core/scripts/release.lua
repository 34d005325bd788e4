-- Model: tests/model/redis.rs, Script::release (one atomic step).
-- Release our hold on a lock (alone or shared) or a semaphore permit, handing
-- what that frees to the waiters at the head of the queue (see lib.lua's grant).
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters, KEYS[4] their terms,
-- KEYS[5] shared holds, KEYS[6] their weights
-- ARGV[1] token, ARGV[2] 'p' for a semaphore's permit (its lock key is never set:
-- not read)
-- Returns 1 when released, 0 when we held nothing (nothing changed).
if not let_go(KEYS[1], KEYS[5], KEYS[3], KEYS[4], KEYS[2], ARGV[1], KEYS[6], ARGV[2] == 'p') then
  return 0
end
return 1
