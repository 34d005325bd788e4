-- Tell whether anyone holds a lock (alone, or a reader whose lease has not run
-- out), without changing anything: Laravel's isLocked().
-- KEYS[1] lock, KEYS[2] shared holds
-- Returns 1 when held, 0 when free.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 1
end
if redis.call('ZCOUNT', KEYS[2], '(' .. now_ms(), '+inf') > 0 then
  return 1
end
return 0
