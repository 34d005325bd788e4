-- Model: tests/model/redis.rs, Script::fence (one atomic step).
-- The fencing token of our lease, assigned on the first request: an uncontended
-- acquire leaves it empty (see acquire.lua). Strictly increasing in the order of
-- holds all the same: only the holder can ask, so assignments follow the holds.
-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] token
-- Returns the fence, or false when the lease is no longer ours.
local value = redis.call('GET', KEYS[1])
if not owns(value, ARGV[1]) then
  return false
end
local fence = string.sub(value, #ARGV[1] + 2)
if fence ~= '' then
  return fence
end
fence = next_fence(KEYS[2], math.max(redis.call('PTTL', KEYS[1]), 0))
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'KEEPTTL')
return fence
