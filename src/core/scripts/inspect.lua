-- Model: tests/model/redis.rs, Script::inspect (what a restored hold asks before it is relied on).
-- Tell what our token holds, without changing anything.
-- KEYS[1] lock, KEYS[2] shared holds, KEYS[3] the permits' weights
-- ARGV[1] token
-- Returns {pttl, fence} when it holds the lock alone, {pttl, '-', false, weight}
-- for a shared hold, nil otherwise. A restored permit's object learns its
-- weight here: taking its acquire() at its word would count one hold of 3
-- permits as 1.
local value = redis.call('GET', KEYS[1])
if owns(value, ARGV[1]) then
  return {redis.call('PTTL', KEYS[1]), string.sub(value, #ARGV[1] + 2)}
end
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
local now = now_ms()
if ends and ends > now then
  return {ends - now, '-', false, tonumber(redis.call('HGET', KEYS[3], ARGV[1])) or 1}
end
return false
