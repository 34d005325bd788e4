-- Model: tests/model/redis.rs, Script::inspect (what a restored hold asks before it is relied on).
-- Tell what our token holds, without changing anything.
-- KEYS[1] lock, KEYS[2] shared holds
-- ARGV[1] token
-- Returns {pttl, fence} when it holds the lock alone, {pttl, '-'} for a shared
-- hold, nil otherwise.
local value = redis.call('GET', KEYS[1])
if owns(value, ARGV[1]) then
  return {redis.call('PTTL', KEYS[1]), string.sub(value, #ARGV[1] + 2)}
end
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
local now = now_ms()
if ends and ends > now then
  return {ends - now, '-'}
end
return false
