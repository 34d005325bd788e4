-- Model: none (it changes nothing, and no client decision in tests/model depends on it).
-- Tell whether our token holds the lock, without changing anything.
-- KEYS[1] lock
-- ARGV[1] token
-- Returns {pttl, fence} when ours, nil otherwise.
local value = redis.call('GET', KEYS[1])
if not owns(value, ARGV[1]) then
  return false
end
return {redis.call('PTTL', KEYS[1]), string.sub(value, #ARGV[1] + 2)}
