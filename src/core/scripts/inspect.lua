-- Tell whether our token holds the lease, without changing anything.
-- KEYS[1] lock
-- ARGV[1] token
-- Returns {pttl, fence} when ours, nil otherwise.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then
  return false
end
return {redis.call('PTTL', KEYS[1]), string.sub(v, #ARGV[1] + 2)}
